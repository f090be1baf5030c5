//! What needs a person's attention: where they are told of what waits for
//! them ([`NotifySettings`]), and the steps their own agent asks them to
//! allow ([`Approval`]).

use super::{Handle, Millis};
use std::fmt;

/// How long an addressed message may stay unread before its person is
/// told, unless they choose otherwise: five minutes.
pub const DEFAULT_NOTIFY_AFTER: Millis = 5 * 60 * 1000;

/// The longest a person may ask to wait before being told: a day.
pub const MAX_NOTIFY_AFTER: Millis = 24 * 60 * 60 * 1000;

/// The longest webhook address accepted.
pub const MAX_WEBHOOK_LEN: usize = 2048;

/// Where and when a person is told of a message their agent has not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifySettings {
    /// How long after it was sent an unread message is brought to them;
    /// `None`: never.
    pub after: Option<Millis>,
    /// Told at once when none of their agents listens (no push stream, no
    /// waiting inbox check), instead of after `after`.
    pub at_once_when_away: bool,
    /// Where notifications are posted, if anywhere.
    pub webhook: Option<Webhook>,
}

impl Default for NotifySettings {
    fn default() -> Self {
        NotifySettings {
            after: Some(DEFAULT_NOTIFY_AFTER),
            at_once_when_away: false,
            webhook: None,
        }
    }
}

/// A webhook: an address and the shape of what is posted to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    pub url: WebhookUrl,
    pub format: WebhookFormat,
}

/// What a webhook is posted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WebhookFormat {
    /// crosstalk's own JSON object.
    #[default]
    Json,
    /// ntfy's JSON publishing, to the server of a topic URL.
    Ntfy,
    /// A Slack-compatible incoming webhook: `{"text": …}`.
    Slack,
}

names!(WebhookFormat {
    Json => "json",
    Ntfy => "ntfy",
    Slack => "slack",
});

/// A webhook's address: `https://` (or `http://`, which only a relay that
/// allows private destinations posts to) with a host, printable ASCII,
/// without credentials before the host. Whether its host may be reached is
/// decided when it is posted to, after the name is resolved.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookUrl(String);

/// An `https://` [`WebhookUrl`] as a regular expression, for the API's
/// schemas (with `maxLength` [`MAX_WEBHOOK_LEN`]): a host of printable ASCII
/// without credentials, then a path, query or fragment. (A relay that allows
/// private destinations takes `http://` too; the document describes the
/// default.)
pub const HTTPS_URL_PATTERN: &str =
    r##"^https://[!"$-.0-9;->A-~][!"$-.0-9:->A-~]*(?:[/?#][!-~]*)?$"##;

impl WebhookUrl {
    pub fn parse(url: &str) -> Result<WebhookUrl, String> {
        if url.len() > MAX_WEBHOOK_LEN {
            return Err(format!("is longer than {MAX_WEBHOOK_LEN} characters"));
        }
        if !url.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("must be printable ASCII without spaces (percent-encode the rest)".into());
        }
        let rest = url
            .strip_prefix("https://")
            .or_else(|| url.strip_prefix("http://"))
            .ok_or("must be an https:// URL")?;
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        if authority.contains('@') {
            return Err("must not carry a user name or password before the host".into());
        }
        if authority.is_empty() || authority.starts_with(':') {
            return Err("has no host".into());
        }
        Ok(WebhookUrl(url.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_https(&self) -> bool {
        self.0.starts_with("https://")
    }

    /// Its host (and port), the one part of it safe to show in a log: the
    /// path of many webhooks is their secret.
    pub fn host(&self) -> &str {
        let rest = self.0.split_once("://").map_or("", |(_, rest)| rest);
        rest.split(['/', '?', '#']).next().unwrap_or_default()
    }
}

/// Only the host: a webhook's path and query are often its secret.
impl fmt::Debug for WebhookUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "WebhookUrl({}/…)", self.host())
    }
}

/// A browser a person asked to be notified on (Web Push): where its push
/// service takes messages for it, and the keys its messages are
/// encrypted to (RFC 8291).
#[derive(Clone, PartialEq, Eq)]
pub struct Device {
    pub id: DeviceId,
    pub handle: Handle,
    /// The push service's URL for this browser: a capability, kept like a
    /// secret (only its host is shown or logged).
    pub endpoint: String,
    /// The browser's P-256 public key, uncompressed (65 bytes).
    pub p256dh: Vec<u8>,
    /// The browser's authentication secret (16 bytes).
    pub auth: Vec<u8>,
    pub created_at: Millis,
}

impl Device {
    /// The push service's host, the one part of the endpoint safe to show.
    pub fn service(&self) -> &str {
        let rest = self.endpoint.split_once("://").map_or("", |(_, rest)| rest);
        rest.split(['/', '?', '#']).next().unwrap_or_default()
    }
}

/// The keys stay out of logs; the endpoint shows only its host.
impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device")
            .field("id", &self.id)
            .field("handle", &self.handle)
            .field("service", &self.service())
            .finish_non_exhaustive()
    }
}

/// A device's id: the store's number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeviceId(pub i64);

number_ids!(DeviceId);

/// An approval's id: the store's number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ApprovalId(pub i64);

number_ids!(ApprovalId);

/// A person's answer to their agent's request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behavior {
    Allow,
    Deny,
}

names!(Behavior {
    Allow => "allow",
    Deny => "deny",
});

/// What a request's input looks like to its person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Preview {
    /// As the agent's client sent it (scanned: no likely secret in it).
    Shown(String),
    /// As the client sent it but for the likely secrets in it, each
    /// replaced by `[withheld: <kind>]`; the kinds masked, each once.
    Masked { text: String, kinds: Vec<String> },
    /// Not kept: it looked like it carried a secret of this kind, which
    /// could not be masked on its own. Its person cannot see what they
    /// would allow.
    Withheld(String),
}

impl Preview {
    /// As every store keeps it, in two columns: the text shown (empty when
    /// withheld), and the kinds of secret masked in it, one a line, or the
    /// kind withheld (none when shown as sent). A masked text is never
    /// empty (it holds a `[withheld: …]`), which tells it from a withheld
    /// one; rows kept before masking existed read as they did.
    pub fn to_columns(&self) -> (&str, Option<String>) {
        match self {
            Preview::Shown(text) => (text.as_str(), None),
            Preview::Masked { text, kinds } => (text.as_str(), Some(kinds.join("\n"))),
            Preview::Withheld(kind) => ("", Some(kind.clone())),
        }
    }

    /// [`Preview::to_columns`]'s columns, read back.
    pub fn from_columns(text: String, withheld: Option<String>) -> Preview {
        match withheld {
            None => Preview::Shown(text),
            Some(kind) if text.is_empty() => Preview::Withheld(kind),
            Some(kinds) => Preview::Masked {
                text,
                kinds: kinds.lines().map(str::to_owned).collect(),
            },
        }
    }
}

/// A step a person's agent asks them to allow (Claude Code's permission
/// prompt, relayed by the bridge).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    pub id: ApprovalId,
    /// Whose agent asked: the one person who may answer.
    pub handle: Handle,
    /// The client's own id for the prompt (Claude Code's five letters).
    pub request_id: String,
    pub tool_name: String,
    pub description: String,
    pub preview: Preview,
    pub created_at: Millis,
    /// No answer is taken from this moment on.
    pub expires_at: Millis,
    /// The answer and when it came.
    pub answer: Option<(Behavior, Millis)>,
}

/// Where an approval stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalState {
    Pending,
    Allowed,
    Denied,
    Expired,
}

names!(ApprovalState {
    Pending => "pending",
    Allowed => "allowed",
    Denied => "denied",
    Expired => "expired",
});

impl Approval {
    pub fn state(&self, now: Millis) -> ApprovalState {
        match self.answer {
            Some((Behavior::Allow, _)) => ApprovalState::Allowed,
            Some((Behavior::Deny, _)) => ApprovalState::Denied,
            None if now >= self.expires_at => ApprovalState::Expired,
            None => ApprovalState::Pending,
        }
    }
}

/// An approval about to be stored; the store gives it an id.
#[derive(Debug, Clone)]
pub struct NewApproval {
    pub handle: Handle,
    pub request_id: String,
    pub tool_name: String,
    pub description: String,
    pub preview: Preview,
    pub created_at: Millis,
    pub expires_at: Millis,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::assert_pattern_mirrors;

    #[test]
    fn the_url_pattern_says_what_parse_does_for_https() {
        assert_pattern_mirrors(
            HTTPS_URL_PATTERN,
            |text| text.starts_with("https://") && WebhookUrl::parse(text).is_ok(),
            &[
                "https://ntfy.sh/team-bob",
                "https://h:8080?x#y",
                "https://h#",
                "https://",
                "https://:80/",
                "https://u@h/",
                "https://h/@x",
                "https://h/a b",
                "https://é/",
                "http://h/",
                "https://h\n",
                "https:///x",
                "https://?q",
                "ftp://h",
            ],
        );
    }

    #[test]
    fn a_preview_reads_back_from_its_columns_as_it_was_kept() {
        for preview in [
            Preview::Shown("cargo test".into()),
            Preview::Shown(String::new()),
            Preview::Masked {
                text: "curl -H \"X-Key: [withheld: an AWS access key id]\"".into(),
                kinds: vec!["an AWS access key id".into(), "a GitHub token".into()],
            },
            Preview::Withheld("a private key".into()),
        ] {
            let (text, withheld) = preview.to_columns();
            assert_eq!(Preview::from_columns(text.to_owned(), withheld), preview);
        }
    }

    #[test]
    fn webhook_urls_are_https_with_a_host_and_no_credentials() {
        for good in [
            "https://ntfy.sh/team-bob",
            "https://hooks.slack.com/services/T0/B0/XYZ",
            "http://10.0.0.5:8080/hook",
        ] {
            assert!(WebhookUrl::parse(good).is_ok(), "{good}");
        }
        for bad in [
            "ftp://example.com/",
            "https://",
            "https://:443/x",
            "https://user:pw@example.com/",
            "https://exa mple.com/",
            "example.com/hook",
        ] {
            assert!(WebhookUrl::parse(bad).is_err(), "{bad}");
        }
        let url = WebhookUrl::parse("https://hooks.slack.com/services/SECRET").unwrap();
        assert_eq!(url.host(), "hooks.slack.com");
        assert!(!format!("{url:?}").contains("SECRET"));
    }
}
