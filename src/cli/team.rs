//! The commands that manage the team (`add`, `rotate`, `revoke`,
//! `notify`, `people`), through the core's [`Team`], and what they print.

use super::Admin;
use crate::relay::{NewToken, Team};
use crate::wire::attention::{ChangeNotifications, Notifications};
use crate::wire::timestamp;

/// Runs a command that manages the team.
pub async fn admin(team: &Team, command: Admin) -> anyhow::Result<()> {
    match command {
        Admin::Add {
            handle,
            name,
            address,
            ..
        } => {
            // Before the token exists: it is shown once, with lines that work.
            let url = address.agent_url()?;
            warn_if_default(&address, &url);
            let added = team.add(&handle, name.as_deref()).await?;
            println!("Added {} ({}).", added.handle, added.name);
            print_connection(&added, &url);
        }
        Admin::Rotate {
            handle, address, ..
        } => {
            let url = address.agent_url()?;
            warn_if_default(&address, &url);
            let rotated = team.rotate(&handle).await?;
            println!(
                "New token for {}; the old one no longer works.",
                rotated.handle
            );
            print_connection(&rotated, &url);
        }
        Admin::Revoke {
            handle,
            participants,
            ..
        } => {
            let revoked = team.revoke(&handle).await?;
            // Only the ids of `id:token,id:token`; the tokens are never read.
            let from_environment = participants
                .iter()
                .flat_map(|list| list.split(','))
                .filter_map(|entry| entry.split_once(':').map(|(id, _)| id.trim()))
                .any(|id| id == revoked.as_str());
            if from_environment {
                anyhow::bail!(
                    "Revoked {revoked}'s token, but {revoked} also has an identity in \
                     RELAY_PARTICIPANTS, which still works: remove it there and restart the relay."
                );
            }
            println!("Revoked {revoked}: their token no longer works.");
        }
        Admin::Notify {
            handle,
            webhook,
            format,
            no_webhook,
            after,
            off,
            notify_allow_private,
            ..
        } => {
            let mut change = ChangeNotifications {
                webhook_format: format,
                ..ChangeNotifications::default()
            };
            if let Some(url) = webhook {
                change.webhook = Some(Some(url));
            } else if no_webhook {
                change.webhook = Some(None);
            }
            if off {
                change.after_seconds = Some(None);
            } else if let Some(after) = after {
                change.after_seconds = Some(Some(parse_duration(&after)?));
            }
            notify(team, &handle, change, notify_allow_private).await?;
        }
        Admin::People { .. } => print_people(team).await?,
    }
    Ok(())
}

/// Changes a person's notification settings and says what they are now.
async fn notify(
    team: &Team,
    handle: &str,
    change: ChangeNotifications,
    allow_private: bool,
) -> anyhow::Result<()> {
    let (handle, current) = team.notify_settings(handle).await?;
    let settings = change.apply(current)?;
    team.set_notify_settings(&handle, settings.clone(), allow_private)
        .await?;
    let shown = Notifications::from(&settings);
    let when = match shown.after_seconds {
        None => "never told of unread messages".to_owned(),
        Some(0) => "told of unread messages at once".to_owned(),
        Some(seconds) => format!("told of unread messages after {seconds} s"),
    };
    let webhook = match &settings.webhook {
        Some(webhook) => format!(
            "posted to {} ({})",
            webhook.url.as_str(),
            webhook.format.as_str()
        ),
        None => "no webhook".to_owned(),
    };
    println!("{handle} is {when}; {webhook}.");
    Ok(())
}

/// Lists the team, revoked people too.
async fn print_people(team: &Team) -> anyhow::Result<()> {
    let people = team.people().await?;
    if people.is_empty() {
        println!("Nobody yet. Add someone with: crosstalk add HANDLE [NAME]");
        return Ok(());
    }
    println!(
        "{:<20} {:<24} {:<25} {:<25} REVOKED",
        "HANDLE", "NAME", "CREATED", "LAST SEEN"
    );
    for p in people {
        println!(
            "{:<20} {:<24} {:<25} {:<25} {}",
            p.handle.as_str(),
            p.name,
            timestamp(p.created_at),
            p.last_seen_at.map_or_else(|| "never".into(), timestamp),
            p.revoked_at.map_or_else(|| "-".into(), timestamp),
        );
    }
    Ok(())
}

/// The service's own configuration, as `deploy/install.sh` writes it.
const SERVICE_ENV_FILE: &str = "/etc/crosstalk/crosstalk.env";

/// Says so when the address printed is only the default: people given a
/// loopback address on a server would connect nowhere.
fn warn_if_default(address: &crate::config::AddressArgs, url: &str) {
    if !address.is_default() {
        return;
    }
    eprintln!(
        "warning: nothing names this relay's address (RELAY_PUBLIC_URL, RELAY_DOMAINS, \
         RELAY_PORT), so the lines below use the default, {url}."
    );
    if std::path::Path::new(SERVICE_ENV_FILE).exists() {
        eprintln!(
            "         This machine runs the service: use `sudo crosstalk-admin add|rotate …`, \
             which reads {SERVICE_ENV_FILE}, for lines with its public address."
        );
    }
}

/// The token, shown once, and what fits this relay to connect with it:
/// `crosstalk connect` (Claude Code and the other agents), plain HTTP, and
/// for a relay on a public https address the connectors that sign in with
/// OAuth (claude.ai, ChatGPT), which cannot reach any other. The rest (the
/// channel paths, the bridge by hand) is in docs/agents.md.
fn print_connection(new: &NewToken, public_url: &str) {
    let url = format!("{public_url}/mcp");
    let (handle, token) = (&new.handle, new.token.expose());
    println!(
        "\nToken for {handle} (shown only now; keep it somewhere safe):\n\n    {token}\n\n\
         On {handle}'s machine, with the crosstalk binary there, set up their agent (claude, or\n\
         codex, gemini, opencode, cursor), so that a teammate's question reaches it by the best\n\
         path that agent has:\n\n    \
         crosstalk connect claude --url {public_url} --token {token}\n\n\
         Or over HTTP alone (the agent then checks its inbox when it thinks to):\n\n    \
         claude mcp add --transport http crosstalk {url} --header \"Authorization: Bearer {token}\""
    );
    let public = public_url.starts_with("https://")
        && crate::host::url_host(public_url).is_some_and(|host| !crate::host::is_loopback(&host));
    if public {
        println!(
            "\nclaude.ai (and through it Claude Desktop and the mobile apps), ChatGPT and other\n\
             connectors sign in with OAuth instead of a token: add the relay as a connector\n\
             and sign in on the page it opens as {handle}, with the token above.\n\n    \
             claude.ai: Settings → Connectors → Add custom connector, URL {url}\n    \
             ChatGPT: in developer mode, create a connector with URL {url} and OAuth"
        );
    }
    println!(
        "\nClaude Code's channels and the bridge by hand: docs/agents.md in crosstalk's repository."
    );
}

/// `90s`, `5m`, `1h`, or plain seconds, as seconds.
fn parse_duration(text: &str) -> anyhow::Result<u64> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => {
            anyhow::bail!("--after {text:?}: a number of seconds, or with s, m or h (90s, 5m, 1h)")
        }
    };
    let number: u64 = number
        .parse()
        .map_err(|_| anyhow::anyhow!("--after {text:?}: a number of seconds, or with s, m or h"))?;
    number
        .checked_mul(scale)
        .ok_or_else(|| anyhow::anyhow!("--after {text:?}: at most a day"))
}
