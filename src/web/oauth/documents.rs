//! Clients' metadata documents (Client ID Metadata Documents), fetched
//! through [`crate::outbound`]'s guards and kept as their cache headers
//! allow, within bounds.

use crate::model::{ClientIdUrl, ClientMetadata};
use reqwest::header;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The largest metadata document read.
const MAX_DOCUMENT_BYTES: usize = 64 * 1024;
/// How long a document is kept when its headers do not say.
const DOCUMENT_KEPT: Duration = Duration::from_secs(300);
/// The longest a document is kept, whatever its headers say.
const MAX_DOCUMENT_KEPT: Duration = Duration::from_secs(3600);
/// The most documents kept at once.
const MAX_DOCUMENTS: usize = 256;

/// Clients' metadata documents, fetched and kept.
pub(super) struct Documents {
    pub(super) client: Option<reqwest::Client>,
    pub(super) allow_private: bool,
    pub(super) kept: Mutex<HashMap<String, (Instant, ClientMetadata)>>,
}

impl Documents {
    /// The metadata document at `url`: kept, or fetched.
    pub(super) async fn metadata(&self, url: &ClientIdUrl) -> Result<ClientMetadata, String> {
        let key = url.as_str().to_owned();
        if let Some((until, metadata)) = self.kept.lock().expect("documents lock").get(&key)
            && *until > Instant::now()
        {
            return Ok(metadata.clone());
        }
        let (metadata, kept_for) = self.fetch(url).await?;
        let mut kept = self.kept.lock().expect("documents lock");
        kept.retain(|_, (until, _)| *until > Instant::now());
        if !kept_for.is_zero() && kept.len() < MAX_DOCUMENTS {
            kept.insert(key, (Instant::now() + kept_for, metadata.clone()));
        }
        Ok(metadata)
    }

    async fn fetch(&self, url: &ClientIdUrl) -> Result<(ClientMetadata, Duration), String> {
        let cannot =
            |why: String| format!("the client's metadata document {}: {why}", url.as_str());
        crate::host::check_url(url.url(), self.allow_private).map_err(|e| cannot(e.to_string()))?;
        let client = self
            .client
            .as_ref()
            .ok_or_else(|| cannot("this relay cannot make outbound requests".into()))?;
        let mut response = client
            .get(url.url().clone())
            .header(header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| cannot(outbound_failure(&e)))?;
        if response.status() != reqwest::StatusCode::OK {
            return Err(cannot(format!("it answered {}", response.status())));
        }
        let kept_for = kept_for(response.headers());
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| cannot(outbound_failure(&e)))?
        {
            if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
                return Err(cannot(format!(
                    "it is larger than {MAX_DOCUMENT_BYTES} bytes"
                )));
            }
            body.extend_from_slice(&chunk);
        }
        let metadata = ClientMetadata::document(url, &body)
            .map_err(|refusal| cannot(refusal.description().to_owned()))?;
        Ok((metadata, kept_for))
    }
}

/// Why an outbound request failed, with the guard's reason if it was that.
fn outbound_failure(error: &reqwest::Error) -> String {
    let mut source: Option<&dyn std::error::Error> = Some(error);
    while let Some(cause) = source {
        if let Some(refused) = cause.downcast_ref::<crate::host::Refused>() {
            return refused.to_string();
        }
        source = cause.source();
    }
    if error.is_timeout() {
        "it did not answer in time".into()
    } else {
        "it could not be fetched".into()
    }
}

/// How long a response's `Cache-Control` lets it be kept, within bounds.
fn kept_for(headers: &reqwest::header::HeaderMap) -> Duration {
    let Some(control) = headers
        .get(reqwest::header::CACHE_CONTROL)
        .and_then(|v| v.to_str().ok())
    else {
        return DOCUMENT_KEPT;
    };
    let mut kept = DOCUMENT_KEPT;
    for directive in control.split(',').map(str::trim) {
        let directive = directive.to_ascii_lowercase();
        if directive == "no-store" || directive == "no-cache" {
            return Duration::ZERO;
        }
        if let Some(seconds) = directive.strip_prefix("max-age=")
            && let Ok(seconds) = seconds.trim_matches('"').parse::<u64>()
        {
            kept = Duration::from_secs(seconds);
        }
    }
    kept.min(MAX_DOCUMENT_KEPT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_are_kept_as_their_cache_headers_say_within_bounds() {
        let with = |value: &str| {
            let mut headers = reqwest::header::HeaderMap::new();
            headers.insert(
                reqwest::header::CACHE_CONTROL,
                reqwest::header::HeaderValue::from_str(value).unwrap(),
            );
            kept_for(&headers)
        };
        assert_eq!(kept_for(&reqwest::header::HeaderMap::new()), DOCUMENT_KEPT);
        assert_eq!(with("public, max-age=60"), Duration::from_secs(60));
        assert_eq!(with("max-age=999999"), MAX_DOCUMENT_KEPT);
        assert_eq!(with("no-store"), Duration::ZERO);
        assert_eq!(with("max-age=60, no-cache"), Duration::ZERO);
    }
}
