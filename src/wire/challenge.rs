//! The `WWW-Authenticate` of a 401 on the OAuth resource (`/mcp`): RFC 6750
//! §3 and RFC 9728 §5.1, by what the request presented. The OAuth edge
//! makes it (it knows where the metadata is); the credentials layer sends
//! it.

use crate::model::looks_like_a_persons_token;
use axum::http::HeaderValue;

#[derive(Clone)]
pub struct Challenge {
    /// No token: where to sign in (`resource_metadata=…`).
    pub sign_in: HeaderValue,
    /// A token that is not a person's, refused (an OAuth access token that
    /// expired or whose grant ended): `invalid_token`, and where to sign in
    /// again.
    pub token_refused: HeaderValue,
    /// A person's static token, refused (revoked, rotated, mistyped):
    /// `invalid_token` and no pointer into OAuth. A client set up with a
    /// static token is told its token was refused, never sent to sign in.
    pub person_token_refused: HeaderValue,
}

/// The shape of a Bearer token a request presented, kept to choose the
/// challenge if it is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presented {
    Nothing,
    PersonsToken,
    OtherToken,
}

impl Presented {
    pub fn bearer(token: Option<&str>) -> Presented {
        match token {
            None => Presented::Nothing,
            Some(token) if looks_like_a_persons_token(token) => Presented::PersonsToken,
            Some(_) => Presented::OtherToken,
        }
    }
}

impl Challenge {
    pub fn for_presented(&self, presented: Presented) -> &HeaderValue {
        match presented {
            Presented::Nothing => &self.sign_in,
            Presented::PersonsToken => &self.person_token_refused,
            Presented::OtherToken => &self.token_refused,
        }
    }
}
