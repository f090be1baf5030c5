//! The browsers a person is notified on (Web Push), and the relay's own
//! key toward push services (VAPID, RFC 8292): made once, kept in the
//! store, the same for every relay serving it, so a browser subscribed
//! through one is reached through any.

use super::notify::check_destination;
use super::{Caller, Relay, RelayError, RelayResult};
use crate::model::{Device, DeviceId, Handle, WebhookUrl, now_millis};
use base64::Engine;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use std::sync::Arc;

/// The most browsers one person may be notified on.
pub const MAX_DEVICES: usize = 10;

/// The relay's VAPID key pair (ECDSA P-256).
pub struct PushKey {
    pair: EcdsaKeyPair,
}

impl PushKey {
    /// The public key, uncompressed (65 bytes): a browser's
    /// `applicationServerKey`, and the `k` of every push's authorization.
    pub fn public_key(&self) -> &[u8] {
        self.pair.public_key().as_ref()
    }

    /// The public key in base64url without padding, as browsers take it.
    pub fn public_key_text(&self) -> String {
        base64url(self.public_key())
    }

    /// Signs `message` with ES256 (r ‖ s, 64 bytes), for a VAPID JWT.
    pub fn sign(&self, message: &[u8]) -> Result<Vec<u8>, ring::error::Unspecified> {
        Ok(self
            .pair
            .sign(&SystemRandom::new(), message)?
            .as_ref()
            .to_vec())
    }
}

pub fn base64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// base64url, with or without padding, as browsers give their keys.
fn from_base64url(text: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text.trim().trim_end_matches('='))
        .ok()
}

/// The base64url a browser's P-256 key (65 bytes, the first 4) and its
/// authentication secret (16 bytes) take, as [`from_base64url`] reads them:
/// for the API's schemas.
pub fn p256dh_pattern() -> String {
    key_pattern("B[A-P][A-Za-z0-9_-]{84}[AEIMQUYcgkosw048]")
}

pub fn auth_pattern() -> String {
    key_pattern("[A-Za-z0-9_-]{21}[AQgw]")
}

fn key_pattern(base64url: &str) -> String {
    let space = super::text::WHITESPACE;
    format!("^[{space}]*{base64url}=*[{space}]*$")
}

impl Relay {
    /// The VAPID key, made on first use and kept.
    pub async fn push_key(&self) -> RelayResult<Arc<PushKey>> {
        let key = self
            .push_key
            .get_or_try_init(|| async {
                let rng = SystemRandom::new();
                let fresh = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
                    .map_err(|_| internal("making the Web Push key failed"))?;
                let kept = self.store.key_or("vapid", fresh.as_ref().to_vec()).await?;
                let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &kept, &rng)
                    .map_err(|_| internal("the kept Web Push key cannot be read"))?;
                Ok::<_, RelayError>(Arc::new(PushKey { pair }))
            })
            .await?;
        Ok(key.clone())
    }

    /// Subscribes a browser of the caller's (its `PushSubscription`: the
    /// endpoint and its `p256dh` and `auth` keys, in base64url).
    pub async fn add_device(
        &self,
        caller: &Caller,
        endpoint: &str,
        p256dh: &str,
        auth: &str,
    ) -> RelayResult<Device> {
        let me = self.person(caller)?.clone();
        let url = WebhookUrl::parse(endpoint).map_err(|e| RelayError::bad_field("endpoint", e))?;
        check_destination(&url, self.settings.notify_allow_private)
            .map_err(|e| RelayError::bad_field("endpoint", e))?;
        let p256dh = from_base64url(p256dh)
            .filter(|key| key.len() == 65 && key[0] == 4)
            .ok_or_else(|| {
                RelayError::BadInput(
                    "keys.p256dh: the browser's P-256 public key, uncompressed (65 bytes), in \
                     base64url"
                        .into(),
                )
            })?;
        let auth = from_base64url(auth)
            .filter(|secret| secret.len() == 16)
            .ok_or_else(|| {
                RelayError::BadInput(
                    "keys.auth: the browser's 16-byte authentication secret, in base64url".into(),
                )
            })?;
        let mine = self.store.devices(&me).await?;
        if mine.len() >= MAX_DEVICES && !mine.iter().any(|d| d.endpoint == endpoint) {
            return Err(RelayError::Conflict(format!(
                "you are notified on {MAX_DEVICES} browsers already: remove one first"
            )));
        }
        let device = self
            .store
            .add_device(Device {
                id: DeviceId(0),
                handle: me,
                endpoint: endpoint.to_owned(),
                p256dh,
                auth,
                created_at: now_millis(),
            })
            .await?;
        tracing::info!(to = %device.handle, service = device.service(), "a browser will be notified");
        Ok(device)
    }

    /// The caller's devices.
    pub async fn devices(&self, caller: &Caller) -> RelayResult<Vec<Device>> {
        let me = self.person(caller)?;
        self.devices_of(me).await
    }

    /// A person's devices, for delivering their notices.
    pub async fn devices_of(&self, handle: &Handle) -> RelayResult<Vec<Device>> {
        Ok(self.store.devices(handle).await?)
    }

    /// Stops notifying one of the caller's devices.
    pub async fn remove_device(&self, caller: &Caller, id: DeviceId) -> RelayResult<()> {
        let me = self.person(caller)?;
        match self.store.remove_device(id, Some(me)).await? {
            true => Ok(()),
            false => Err(RelayError::NotFound(format!("you have no device {id}"))),
        }
    }

    /// Forgets a device its push service no longer knows (404, 410).
    pub async fn forget_device(&self, id: DeviceId) -> RelayResult<()> {
        self.store.remove_device(id, None).await?;
        Ok(())
    }
}

fn internal(what: &'static str) -> RelayError {
    RelayError::Internal(what.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_patterns_say_what_decoding_does() {
        let p256dh = regex::Regex::new(&p256dh_pattern()).unwrap();
        let auth = regex::Regex::new(&auth_pattern()).unwrap();
        let key = |bytes: &[u8]| base64url(bytes);
        let mut point = vec![4u8; 65];
        let mut cases = vec![key(&point), key(&point) + "=", key(&[4; 64]), key(&[4; 66])];
        for last in 0..=255u8 {
            point[64] = last;
            cases.push(key(&point));
            cases.push(key(&[last; 16]));
        }
        point[0] = 3;
        cases.extend([
            key(&point),
            key(&[1; 15]),
            key(&[1; 17]),
            "A".repeat(87),
            "A".repeat(22),
        ]);
        cases.extend([
            format!(" {}==\n", key(&[7; 16])),
            format!("{} =", key(&[7; 16])),
        ]);
        for text in cases {
            let decoded = from_base64url(&text);
            let is_point = decoded.as_ref().is_some_and(|k| k.len() == 65 && k[0] == 4);
            let is_secret = decoded.as_ref().is_some_and(|k| k.len() == 16);
            assert_eq!(p256dh.is_match(&text), is_point, "{text:?}");
            assert_eq!(auth.is_match(&text), is_secret, "{text:?}");
        }
    }
}
