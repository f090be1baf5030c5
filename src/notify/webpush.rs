//! Web Push as the browsers' push services take it: the payload encrypted
//! to the browser's keys (RFC 8291, `aes128gcm` of RFC 8188, one record),
//! and the request signed with the relay's key (VAPID, RFC 8292).

use crate::model::Device;
use crate::relay::{PushKey, base64url};
use ring::aead::{AES_128_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
use ring::agreement::{ECDH_P256, EphemeralPrivateKey, UnparsedPublicKey, agree_ephemeral};
use ring::error::Unspecified;
use ring::hkdf::{HKDF_SHA256, KeyType, Salt};
use ring::rand::{SecureRandom, SystemRandom};
use serde_json::json;

/// The record size announced: the whole payload is one record below it.
const RECORD_SIZE: u32 = 4096;
/// The largest payload sent, so the body stays within what every push
/// service takes (4096 bytes with the 86-byte header and the 17 bytes of
/// padding delimiter and tag).
pub const MAX_PAYLOAD: usize = 3000;
/// How long a VAPID signature holds (RFC 8292 allows at most 24 h).
const SIGNATURE_LIFETIME_SECS: u64 = 12 * 60 * 60;

/// A length, as ring's HKDF wants one.
struct Len(usize);

impl KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

fn expand(salt: &[u8], ikm: &[u8], info: &[u8], out: &mut [u8]) -> Result<(), Unspecified> {
    Salt::new(HKDF_SHA256, salt)
        .extract(ikm)
        .expand(&[info], Len(out.len()))?
        .fill(out)
}

/// `plaintext` encrypted to `device` (RFC 8291 §3): the body of a push.
pub fn encrypt(device: &Device, plaintext: &[u8]) -> Result<Vec<u8>, Unspecified> {
    let rng = SystemRandom::new();
    let private = EphemeralPrivateKey::generate(&ECDH_P256, &rng)?;
    let public = private.compute_public_key()?;
    let mut salt = [0u8; 16];
    rng.fill(&mut salt)?;
    let ua_public = UnparsedPublicKey::new(&ECDH_P256, &device.p256dh);
    let (cek, nonce) = agree_ephemeral(private, &ua_public, |ecdh_secret| {
        // IKM = HKDF(auth, ecdh, "WebPush: info" ‖ 0 ‖ ua_public ‖ as_public, 32)
        let info = [b"WebPush: info\0", &device.p256dh[..], public.as_ref()].concat();
        let mut ikm = [0u8; 32];
        expand(&device.auth, ecdh_secret, &info, &mut ikm)?;
        let mut cek = [0u8; 16];
        expand(&salt, &ikm, b"Content-Encoding: aes128gcm\0", &mut cek)?;
        let mut nonce = [0u8; 12];
        expand(&salt, &ikm, b"Content-Encoding: nonce\0", &mut nonce)?;
        Ok::<_, Unspecified>((cek, nonce))
    })??;
    let key = LessSafeKey::new(UnboundKey::new(&AES_128_GCM, &cek)?);
    // One record, the last: its padding delimiter is 2, and no padding.
    let mut record = [plaintext, &[2]].concat();
    key.seal_in_place_append_tag(
        Nonce::assume_unique_for_key(nonce),
        Aad::empty(),
        &mut record,
    )?;
    let mut body = Vec::with_capacity(86 + record.len());
    body.extend_from_slice(&salt);
    body.extend_from_slice(&RECORD_SIZE.to_be_bytes());
    body.push(public.as_ref().len() as u8);
    body.extend_from_slice(public.as_ref());
    body.extend_from_slice(&record);
    Ok(body)
}

/// The `Authorization` header of a push to `endpoint` (RFC 8292):
/// `vapid t=JWT, k=KEY`, the JWT for the endpoint's origin.
pub fn authorization(
    key: &PushKey,
    endpoint: &reqwest::Url,
    subject: &str,
    now_secs: u64,
) -> Result<String, Unspecified> {
    let audience = endpoint.origin().ascii_serialization();
    let header = base64url(br#"{"typ":"JWT","alg":"ES256"}"#);
    let claims = json!({
        "aud": audience,
        "exp": now_secs + SIGNATURE_LIFETIME_SECS,
        "sub": subject,
    });
    let signed = format!("{header}.{}", base64url(claims.to_string().as_bytes()));
    let signature = key.sign(signed.as_bytes())?;
    Ok(format!(
        "vapid t={signed}.{}, k={}",
        base64url(&signature),
        key.public_key_text()
    ))
}
