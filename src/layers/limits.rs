//! Rate limits: governor quotas per credential and per client address.
//!
//! - Every authenticated request counts against its credential's quota
//!   (a person, a participant, or the shared token), so one person's flood
//!   never uses up another's.
//! - Requests without valid credentials (none, unknown, revoked, malformed)
//!   count against their client address. An address that runs out is
//!   refused *before* any token lookup until its quota refills, so guessing
//!   tokens is slow as well as hopeless.
//!
//! - OAuth client registrations (open to anyone, and each a row kept for a
//!   day) have a budget of their own per address, whatever the quotas
//!   above, spent by every attempt; the relay's own budget for them, spent
//!   only by registrations it stores, is the core's (`relay/quota.rs`).
//!
//! IPv6 addresses are counted by their /64, which one client usually holds
//! whole. Keyed state is pruned every minute, and early when it grows past
//! [`MAX_KEYS`], so it stays bounded however many addresses appear.

use crate::config::{Limits, Rate};
use crate::host::client_group;
use crate::metrics::{Quota as Refused, QuotaRefusals};
use governor::{
    DefaultKeyedRateLimiter, Quota, RateLimiter,
    clock::{Clock, DefaultClock},
};
use std::{
    collections::HashMap,
    net::IpAddr,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

/// Past this many keys, a limiter drops the keys that have refilled.
pub const MAX_KEYS: usize = 65_536;
/// How often [`RateLimits::prune`] should run.
pub const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// Client registrations one address may make: this many at once, then
/// one every [`REGISTRATION_REFILL`] (a person adds an app a few times).
pub const REGISTRATIONS_PER_ADDRESS: u32 = 10;
/// How long a used registration takes to come back, per address.
pub const REGISTRATION_REFILL: Duration = Duration::from_secs(360);

/// A request refused by a quota: what ran out, and when to try again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Limited {
    pub message: String,
    /// When the quota has room again.
    pub retry_after: Duration,
}

impl Limited {
    fn new(message: impl Into<String>, retry_after: Duration) -> Limited {
        Limited {
            message: message.into(),
            retry_after,
        }
    }
}

pub struct RateLimits {
    per_credential: Option<DefaultKeyedRateLimiter<String>>,
    per_address: Option<DefaultKeyedRateLimiter<IpAddr>>,
    /// Addresses that ran out of their quota, and until when they are refused.
    blocked: Mutex<HashMap<IpAddr, Instant>>,
    /// OAuth client registrations, per address.
    registrations_per_address: DefaultKeyedRateLimiter<IpAddr>,
    /// Where the requests each quota refused are counted.
    refused: Arc<QuotaRefusals>,
    clock: DefaultClock,
}

fn quota(rate: Rate) -> Quota {
    Quota::per_second(rate.per_second).allow_burst(rate.burst)
}

impl RateLimits {
    pub fn new(limits: &Limits, refused: Arc<QuotaRefusals>) -> RateLimits {
        RateLimits {
            per_credential: limits
                .per_credential
                .map(|rate| RateLimiter::keyed(quota(rate))),
            per_address: limits
                .per_address
                .map(|rate| RateLimiter::keyed(quota(rate))),
            blocked: Mutex::new(HashMap::new()),
            registrations_per_address: RateLimiter::keyed(
                Quota::with_period(REGISTRATION_REFILL)
                    .expect("a period above zero")
                    .allow_burst(
                        std::num::NonZeroU32::new(REGISTRATIONS_PER_ADDRESS)
                            .expect("a budget above zero"),
                    ),
            ),
            refused,
            clock: DefaultClock::default(),
        }
    }

    /// Counts an OAuth client registration attempted from `ip`.
    pub fn registration(&self, ip: IpAddr) -> Result<(), Limited> {
        let key = client_group(ip);
        if let Err(not_until) = self.registrations_per_address.check_key(&key) {
            self.refused.refused(Refused::Registration);
            return Err(Limited::new(
                "too many client registrations from this address",
                not_until.wait_time_from(self.clock.now()),
            ));
        }
        if self.registrations_per_address.len() > MAX_KEYS {
            self.registrations_per_address.retain_recent();
        }
        Ok(())
    }

    /// Counts a request made with valid credentials.
    pub fn credential(&self, key: &str) -> Result<(), Limited> {
        let Some(limiter) = &self.per_credential else {
            return Ok(());
        };
        let key = key.to_owned();
        if let Err(not_until) = limiter.check_key(&key) {
            self.refused.refused(Refused::Credential);
            let wait = not_until.wait_time_from(self.clock.now());
            return Err(Limited::new(
                format!(
                    "too many requests with this credential; try again in {}s",
                    wait.as_secs() + 1
                ),
                wait,
            ));
        }
        if limiter.len() > MAX_KEYS {
            limiter.retain_recent();
        }
        Ok(())
    }

    /// Refuses an address that recently ran out of its quota.
    pub fn not_blocked(&self, ip: IpAddr) -> Result<(), Limited> {
        let key = client_group(ip);
        let blocked = self.blocked.lock().expect("blocked addresses lock");
        match blocked.get(&key) {
            Some(until) if *until > Instant::now() => {
                self.refused.refused(Refused::Address);
                Err(Limited::new(
                    "too many requests without valid credentials from this address",
                    *until - Instant::now(),
                ))
            }
            _ => Ok(()),
        }
    }

    /// Counts a request without valid credentials from `ip`.
    pub fn anonymous(&self, ip: IpAddr) -> Result<(), Limited> {
        let Some(limiter) = &self.per_address else {
            return Ok(());
        };
        let key = client_group(ip);
        if let Err(not_until) = limiter.check_key(&key) {
            self.refused.refused(Refused::Address);
            let wait = not_until.wait_time_from(self.clock.now());
            let mut blocked = self.blocked.lock().expect("blocked addresses lock");
            if blocked.len() > MAX_KEYS {
                let now = Instant::now();
                blocked.retain(|_, until| *until > now);
            }
            blocked.insert(key, Instant::now() + wait);
            return Err(Limited::new(
                "too many requests without valid credentials from this address",
                wait,
            ));
        }
        if limiter.len() > MAX_KEYS {
            limiter.retain_recent();
        }
        Ok(())
    }

    /// Forgets keys whose quota has refilled, and blocks that have ended.
    pub fn prune(&self) {
        if let Some(limiter) = &self.per_credential {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
        if let Some(limiter) = &self.per_address {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
        self.registrations_per_address.retain_recent();
        self.registrations_per_address.shrink_to_fit();
        let now = Instant::now();
        self.blocked
            .lock()
            .expect("blocked addresses lock")
            .retain(|_, until| *until > now);
    }

    /// Keys held now (for tests and metrics).
    pub fn keys(&self) -> usize {
        self.per_credential.as_ref().map_or(0, |l| l.len())
            + self.per_address.as_ref().map_or(0, |l| l.len())
            + self.blocked.lock().expect("blocked addresses lock").len()
            + self.registrations_per_address.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_that_runs_out_is_blocked_and_others_are_not() {
        let limits = RateLimits::new(
            &Limits {
                per_credential: None,
                per_address: Rate::new(1, 2),
            },
            Arc::default(),
        );
        let (a, b): (IpAddr, IpAddr) = ("192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap());
        assert!(limits.anonymous(a).is_ok());
        assert!(limits.anonymous(a).is_ok());
        let refused = limits.anonymous(a).unwrap_err();
        assert!(refused.retry_after > Duration::ZERO);
        assert!(limits.not_blocked(a).is_err());
        assert!(limits.not_blocked(b).is_ok());
        assert!(limits.anonymous(b).is_ok());
    }

    #[test]
    fn pruning_keeps_the_state_bounded() {
        // A quota that refills within a nanosecond: every key is fresh again
        // by the time prune runs.
        let fast = Rate::new(1_000_000_000, 1_000_000_000);
        let limits = RateLimits::new(
            &Limits {
                per_credential: None,
                per_address: fast,
            },
            Arc::default(),
        );
        for n in 0..5000u32 {
            limits.anonymous(IpAddr::from(n.to_be_bytes())).unwrap();
        }
        assert_eq!(limits.keys(), 5000);
        limits.prune();
        assert_eq!(limits.keys(), 0);
    }
}
