//! Grants and what they are made from, as the store keeps them.

use crate::model::{Handle, Millis, TokenHash};

/// A grant's id: the store's number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GrantId(pub i64);

number_ids!(GrantId);

/// A client registered by Dynamic Client Registration, as stored. (A
/// client known by its metadata document is fetched, never stored.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredClient {
    pub client_id: String,
    pub name: Option<String>,
    /// Each as registered, checked by [`RedirectUri::parse`].
    pub redirect_uris: Vec<String>,
    pub registered_at: Millis,
}

/// What a person allowed on the consent page: what an authorization code
/// stands for, and then what the grant made from it is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorization {
    pub handle: Handle,
    pub client_id: String,
    /// Shown on the page's list of grants.
    pub client_name: String,
    /// The redirect URI the code was sent to, exactly.
    pub redirect_uri: String,
    /// The PKCE challenge (S256) the code's verifier must match.
    pub challenge: String,
    /// The resource (RFC 8707) every token of the grant is for.
    pub resource: String,
    pub scope: String,
}

/// A person's standing permission for one client, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub id: GrantId,
    pub handle: Handle,
    pub client_id: String,
    pub client_name: String,
    pub redirect_uri: String,
    pub scope: String,
    pub resource: String,
    pub created_at: Millis,
    /// When its tokens were last refreshed (its creation at first).
    pub used_at: Millis,
}

/// The hashes of a new access and refresh token, with when each ends: a
/// grant's tokens, which replace the ones before them whole.
#[derive(Debug, Clone, Copy)]
pub struct GrantTokens {
    pub access: TokenHash,
    pub access_expires: Millis,
    pub refresh: TokenHash,
    pub refresh_expires: Millis,
    /// The hash of the refresh token's family (`model::refresh_family`),
    /// which every refresh token of the grant shares: a refresh token of
    /// the grant's presented after it was replaced is known by it.
    pub family: TokenHash,
}

/// A grant still standing, with its access token if not yet expired: what
/// the core holds in memory to tell who an access token belongs to. One
/// per grant, however often it was refreshed.
#[derive(Debug, Clone)]
pub struct LiveGrant {
    pub id: GrantId,
    pub handle: Handle,
    pub resource: String,
    pub access: Option<(TokenHash, Millis)>,
}

/// What presenting an authorization code came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redeemed {
    /// First use, before it expired: what it stands for.
    Fresh(Authorization),
    /// Used before: the grant made from it, if any, has been ended.
    Reused,
    /// Unknown or expired.
    Unknown,
}

/// What presenting a refresh token came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refreshed {
    /// Rotated: the new tokens replace the grant's (its access token stops
    /// working at once). The presented one was its current refresh token,
    /// or the one that replaced it, again within the grace (a retry).
    Rotated {
        grant: Grant,
        /// How many times the grant has been refreshed, this one included.
        generation: u64,
        /// The store's credentials revision just after the rotation (which
        /// moved it by one), so the relay that refreshed can bring its
        /// memory up to it without reading everything again.
        revision: u64,
    },
    /// A refresh token of the grant's used before (replaced, and past the
    /// grace): someone holds a copy, so the whole grant has ended.
    Reused,
    /// Unknown, expired, or another client's.
    Unknown,
}
