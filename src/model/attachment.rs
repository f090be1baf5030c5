//! Files attached to a message: what is kept of each beside its bytes.

/// The most files one message carries, and the most bytes each holds.
pub const MAX_ATTACHMENTS: usize = 4;
pub const MAX_ATTACHMENT_BYTES: usize = 1 << 20;

/// A file attached to a message, as messages list it; its bytes are kept
/// apart and read one file at a time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// Its place among the message's files: 1, 2, …
    pub n: u32,
    pub name: String,
    /// Its media type, as checked: text (`text/*`, `application/json`) or
    /// an image whose bytes are what it says (PNG, JPEG, GIF, WebP).
    pub content_type: String,
    pub size: u64,
}

impl Attachment {
    /// Whether it is text (else an image).
    pub fn is_text(&self) -> bool {
        is_text_type(&self.content_type)
    }
}

/// The text types an attachment may have.
pub fn is_text_type(content_type: &str) -> bool {
    content_type.starts_with("text/") || content_type == "application/json"
}

/// Whether `declared` is a media type as RFC 6838 names one: `type/subtype`,
/// each 1 to 127 letters, digits and `!#$&-^_.+`, beginning with a letter
/// or a digit. So it is short, and fits a `Content-Type` header.
pub fn is_media_type(declared: &str) -> bool {
    let name = |part: &str| {
        (1..=127).contains(&part.len())
            && part.starts_with(|c: char| c.is_ascii_alphanumeric())
            && part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "!#$&-^_.+".contains(c))
    };
    declared
        .split_once('/')
        .is_some_and(|(kind, subtype)| name(kind) && name(subtype))
}

/// The image types an attachment may have, each with how its bytes begin.
pub fn image_type_of(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::is_media_type;

    #[test]
    fn a_media_type_is_short_and_fits_a_header() {
        for taken in [
            "text/plain",
            "text/x-diff",
            "application/json",
            "image/svg+xml",
            "text/vnd.a.b",
        ] {
            assert!(is_media_type(taken), "{taken}");
        }
        let long = format!("text/{}", "a".repeat(128));
        for refused in [
            "",
            "text",
            "text/",
            "/plain",
            "text/a/b",
            "text/a\u{7}b",
            "text/a b",
            ".text/plain",
            long.as_str(),
        ] {
            assert!(!is_media_type(refused), "{refused:?}");
        }
    }
}
