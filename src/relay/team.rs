//! The team: adding, rotating, revoking and listing people, and what a
//! person says about themselves. The rules for handles, names and statuses
//! live here, so the CLI and every edge apply the same ones.

use super::{Caller, Relay, RelayError, RelayResult, credentials::Credentials, text};
use crate::model::{Handle, NotifySettings, Person, Token, now_millis};
use crate::store::Store;
use std::sync::Arc;

/// The longest display name, in characters.
pub const MAX_NAME_CHARS: usize = 64;
/// The longest status text, in characters.
pub const MAX_STATUS_CHARS: usize = 200;

/// People and their tokens. The CLI changes the team through this, on the
/// database a running relay uses: the relay reads credentials from the
/// database on every request, so a change counts from the next request on.
pub struct Team {
    store: Arc<dyn Store>,
    /// A serving relay's tokens in memory, refreshed at once when this
    /// changes the team (another process's changes reach it by the
    /// relay's own watch).
    credentials: Option<Arc<Credentials>>,
}

/// A token made for a person, to be shown to them once.
#[derive(Debug)]
pub struct NewToken {
    pub handle: Handle,
    /// The name teammates see.
    pub name: String,
    pub token: Token,
}

impl Team {
    /// The team in `store`, for the commands that change it.
    pub fn new(store: Arc<dyn Store>) -> Team {
        Team {
            store,
            credentials: None,
        }
    }

    pub(super) fn serving(store: Arc<dyn Store>, credentials: Arc<Credentials>) -> Team {
        Team {
            store,
            credentials: Some(credentials),
        }
    }

    /// Brings a serving relay's memory up to a change just made.
    async fn changed(&self) -> RelayResult<()> {
        if let Some(credentials) = &self.credentials {
            credentials.refresh().await?;
        }
        Ok(())
    }

    /// Adds a person with a fresh token; `name` defaults to the handle.
    pub async fn add(&self, handle: &str, name: Option<&str>) -> RelayResult<NewToken> {
        let handle = parse_handle(handle)?;
        let name = match name {
            Some(name) => parse_name(name)?,
            None => handle.to_string(),
        };
        let token = Token::generate();
        self.store
            .add_person(&handle, &name, token.hash(), now_millis())
            .await?;
        self.changed().await?;
        Ok(NewToken {
            handle,
            name,
            token,
        })
    }

    /// Replaces a live person's token; the old one stops working at once.
    pub async fn rotate(&self, handle: &str) -> RelayResult<NewToken> {
        let handle = parse_handle(handle)?;
        let token = Token::generate();
        self.store.rotate_token(&handle, token.hash()).await?;
        self.changed().await?;
        let name = self
            .people()
            .await?
            .into_iter()
            .find(|p| p.handle == handle)
            .map_or_else(|| handle.to_string(), |p| p.name);
        Ok(NewToken {
            handle,
            name,
            token,
        })
    }

    /// Cuts a person off at once; their handle stays taken.
    pub async fn revoke(&self, handle: &str) -> RelayResult<Handle> {
        let handle = parse_handle(handle)?;
        self.store.revoke_person(&handle, now_millis()).await?;
        self.changed().await?;
        Ok(handle)
    }

    /// Everyone ever added, revoked or not, oldest first.
    pub async fn people(&self) -> RelayResult<Vec<Person>> {
        Ok(self.store.people().await?)
    }

    /// Whether anyone, revoked or not, was ever added.
    pub async fn has_people(&self) -> RelayResult<bool> {
        Ok(self.store.has_people().await?)
    }

    /// A live person's notification settings (the defaults until chosen).
    pub async fn notify_settings(&self, handle: &str) -> RelayResult<(Handle, NotifySettings)> {
        let handle = self.live(handle).await?;
        let settings = self.store.notify_settings(&handle).await?;
        Ok((handle, settings.unwrap_or_default()))
    }

    /// Replaces a live person's notification settings (the operator's CLI).
    pub async fn set_notify_settings(
        &self,
        handle: &Handle,
        settings: NotifySettings,
        allow_private: bool,
    ) -> RelayResult<()> {
        super::notify::check_settings(&settings, allow_private)?;
        Ok(self.store.set_notify_settings(handle, settings).await?)
    }

    /// Someone on the team, not revoked.
    async fn live(&self, handle: &str) -> RelayResult<Handle> {
        let handle = parse_handle(handle)?;
        let people = self.store.people().await?;
        match people.iter().find(|p| p.handle == handle) {
            Some(person) if person.revoked_at.is_none() => Ok(handle),
            Some(_) => Err(RelayError::NotFound(format!("{handle} was revoked"))),
            None => Err(RelayError::NotFound(format!(
                "nobody called {handle} was added"
            ))),
        }
    }
}

impl Relay {
    /// Sets the presence text teammates see next to the caller's name.
    /// Returns the handle whose status was set, and the status as stored.
    pub async fn set_status(
        &self,
        caller: &Caller,
        sender: Option<&str>,
        status: &str,
    ) -> RelayResult<(Handle, String)> {
        let me = self.acting_as(caller, sender)?;
        let status = status.trim();
        text::one_line(status, MAX_STATUS_CHARS, || {
            format!("a status is one line of at most {MAX_STATUS_CHARS} characters")
        })?;
        self.store.set_status(&me, status, now_millis()).await?;
        Ok((me, status.to_owned()))
    }
}

fn parse_handle(raw: &str) -> RelayResult<Handle> {
    Handle::parse(raw).map_err(|e| RelayError::BadInput(e.to_string()))
}

/// A display name: one line of 1 to [`MAX_NAME_CHARS`] characters, trimmed,
/// held to the rules of every short text teammates see (no invisible
/// characters, no likely secret).
fn parse_name(raw: &str) -> RelayResult<String> {
    let name = raw.trim();
    let shape = || format!("a name is one line of 1 to {MAX_NAME_CHARS} characters");
    if name.is_empty() {
        return Err(RelayError::BadInput(shape()));
    }
    text::one_line(name, MAX_NAME_CHARS, shape)?;
    Ok(name.to_owned())
}
