//! Files attached to a message: at most [`MAX_ATTACHMENTS`], each at most
//! [`MAX_ATTACHMENT_BYTES`], text or an image. Text passes the secret check
//! as a body does; an image's bytes must be what its type says; anything
//! else is refused with a clear error, and nothing of the message is kept.

use super::{Relay, RelayError, RelayResult, secrets, text};
use crate::model::{
    Attachment, MAX_ATTACHMENT_BYTES, MAX_ATTACHMENTS, MessageId, image_type_of, is_media_type,
    is_text_type, now_millis,
};
use base64::Engine as _;

/// The longest file name, in characters.
pub const MAX_FILE_NAME_CHARS: usize = 200;

/// A file as a caller sends it.
#[derive(Debug, Clone, Default)]
pub struct Upload {
    pub name: String,
    pub content_type: String,
    pub data_base64: String,
}

/// The files of a message, checked: each listed with its bytes.
pub(super) async fn check_files(uploads: Vec<Upload>) -> RelayResult<Vec<(Attachment, Vec<u8>)>> {
    if uploads.len() > MAX_ATTACHMENTS {
        return Err(RelayError::BadInput(format!(
            "attachments: at most {MAX_ATTACHMENTS} files a message; got {}",
            uploads.len()
        )));
    }
    // Most messages carry none: no hop at all for them.
    if uploads.is_empty() {
        return Ok(Vec::new());
    }
    // Decoding and scanning up to 4 MiB is the blocking pool's work, not
    // the async workers'.
    tokio::task::spawn_blocking(move || {
        uploads
            .into_iter()
            .enumerate()
            .map(|(i, upload)| check_file(i as u32 + 1, &format!("attachments[{i}]"), upload))
            .collect()
    })
    .await
    .map_err(|e| RelayError::Internal(Box::new(e)))?
}

/// One file: its name, its bytes, and that they are what its type says.
fn check_file(n: u32, field: &str, upload: Upload) -> RelayResult<(Attachment, Vec<u8>)> {
    let name = upload.name.trim();
    if name.is_empty() || name.contains(['/', '\\']) {
        return Err(RelayError::BadInput(format!(
            "{field}.name: a file name, without / or \\"
        )));
    }
    text::one_line(name, MAX_FILE_NAME_CHARS, || {
        format!("{field}.name: one line of at most {MAX_FILE_NAME_CHARS} characters")
    })?;
    // At most the base64 of the largest file (4 characters for 3 bytes).
    if upload.data_base64.len() > MAX_ATTACHMENT_BYTES.div_ceil(3) * 4 + 4 {
        return Err(RelayError::TooLarge {
            size: upload.data_base64.len() / 4 * 3,
            max: MAX_ATTACHMENT_BYTES,
        });
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(upload.data_base64.trim())
        .map_err(|e| RelayError::BadInput(format!("{field}.data_base64: not base64 ({e})")))?;
    if bytes.len() > MAX_ATTACHMENT_BYTES {
        return Err(RelayError::TooLarge {
            size: bytes.len(),
            max: MAX_ATTACHMENT_BYTES,
        });
    }
    let declared = upload
        .content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    // Kept as declared for text, and sent back as a download's header.
    if !is_media_type(&declared) {
        return Err(RelayError::BadInput(format!(
            "{field}.content_type: a media type such as text/plain or image/png (type/subtype, \
             each at most 127 letters, digits and !#$&-^_.+)"
        )));
    }
    let content_type = if is_text_type(&declared) {
        let text = std::str::from_utf8(&bytes).map_err(|_| {
            RelayError::BadInput(format!("{field}: {declared} that is not UTF-8 text"))
        })?;
        if text.contains('\0') {
            return Err(RelayError::BadInput(format!(
                "{field}: text with a NUL character, which no text attachment may hold"
            )));
        }
        if let Some(kind) = secrets::find_secret(text) {
            return Err(RelayError::SecretRefused(kind));
        }
        declared
    } else if declared.starts_with("image/") {
        match image_type_of(&bytes) {
            Some(found)
                if found == declared || (declared == "image/jpg" && found == "image/jpeg") =>
            {
                found.to_owned()
            }
            _ => {
                return Err(RelayError::BadInput(format!(
                    "{field}: its bytes are not a {declared} image (PNG, JPEG, GIF and WebP are \
                     taken, checked by their bytes)"
                )));
            }
        }
    } else {
        return Err(RelayError::BadInput(format!(
            "{field}.content_type: {declared:?} is not taken: only text (text/*, \
             application/json, diffs) and images (image/png, image/jpeg, image/gif, image/webp)"
        )));
    };
    let attachment = Attachment {
        n,
        name: name.to_owned(),
        content_type,
        size: bytes.len() as u64,
    };
    Ok((attachment, bytes))
}

impl Relay {
    /// File `n` of live message `id`, with its bytes: anyone on the team
    /// may read it, as they may the message.
    pub async fn attachment(&self, id: MessageId, n: u32) -> RelayResult<(Attachment, Vec<u8>)> {
        self.store
            .attachment(id, n, now_millis())
            .await?
            .ok_or_else(|| RelayError::NotFound(format!("message {id} has no file {n}")))
    }
}
