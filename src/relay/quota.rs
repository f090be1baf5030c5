//! Quotas an attacker cannot turn against the team: bytes a person may
//! store a day, how many senders the shared token may name, and how many
//! OAuth clients may register an hour.
//!
//! All are kept in memory: a restart forgets what was spent today, which
//! errs on the side of the team. The byte quota bounds the disk one
//! credential can fill (20 posts a second of 64 KiB would be 110 GB a
//! day); the sender cap bounds the presence rows and inbox topics the
//! shared token can make up.
//!
//! Registrations are open to anyone, so their budgets are shaped to keep a
//! flood from a few addresses from spending them for everyone: each
//! network (an IPv4 /24, an IPv6 /48: `host::network_group`) has a budget
//! of its own; strangers share the relay's; and a network a client has
//! completed a grant from (a code exchanged for one, in the last
//! [`KNOWN_FOR`]) draws first from a budget strangers cannot spend.
//! Which networks those are is remembered in memory, at most
//! [`KNOWN_NETWORKS`] of them (only a person's Allow makes one, so
//! strangers cannot fill it), and forgotten at a restart.

use super::{RelayError, RelayResult};
use crate::host::network_group;
use crate::model::{Handle, Millis};
use std::{
    collections::{HashMap, HashSet},
    net::IpAddr,
    sync::Mutex,
    time::Duration,
};

const DAY_MILLIS: Millis = 86_400_000;
const HOUR_MILLIS: Millis = 3_600_000;
/// OAuth client registrations the relay stores in an hour from networks
/// no client has completed a grant from: it bounds the rows a flood of
/// registrations leaves (each kept a day unless used). Only registrations
/// that pass every check count, so a flood of refused ones spends none of
/// it; each address has a budget of its own besides (`layers/limits.rs`).
pub const REGISTRATIONS_PER_HOUR: u32 = 200;
/// Registrations stored an hour from one network (an IPv4 /24, an IPv6
/// /48), whoever it is: so twenty neighbouring addresses spend one budget.
pub const REGISTRATIONS_PER_NETWORK: u32 = 20;
/// Registrations stored an hour, kept for networks a client has completed
/// a grant from: a connector coming back is not refused because strangers
/// spent [`REGISTRATIONS_PER_HOUR`].
pub const REGISTRATIONS_FOR_KNOWN: u32 = 50;
/// How long a network that completed a grant is known: a refresh token's
/// life, past which its client signs in again anyway.
pub const KNOWN_FOR: Duration = super::oauth::REFRESH_LIFETIME;
/// The most networks known at once; past it, the one whose last grant is
/// oldest is forgotten.
pub const KNOWN_NETWORKS: usize = 1024;
/// Past this many senders, the map forgets those who sent nothing today.
const PRUNE_ABOVE: usize = 4096;

fn known_for_millis() -> Millis {
    Millis::try_from(KNOWN_FOR.as_millis()).unwrap_or(Millis::MAX)
}

/// How many client registrations are stored an hour, and from where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegistrationBudgets {
    /// From one network, whoever it is.
    pub per_network: u32,
    /// From networks no client has completed a grant from.
    pub strangers: u32,
    /// Kept for networks a client has completed a grant from (which may
    /// also use what strangers left).
    pub known: u32,
}

impl Default for RegistrationBudgets {
    fn default() -> RegistrationBudgets {
        RegistrationBudgets {
            per_network: REGISTRATIONS_PER_NETWORK,
            strangers: REGISTRATIONS_PER_HOUR,
            known: REGISTRATIONS_FOR_KNOWN,
        }
    }
}

/// The registrations stored in one clock hour.
#[derive(Default)]
struct Registered {
    hour: Millis,
    /// From the strangers' budget.
    strangers: u32,
    /// From the known networks' budget.
    known: u32,
    /// By network: at most as many as were stored this hour.
    by_network: HashMap<IpAddr, u32>,
}

/// What a person's stored bytes are counted against: each has the day's
/// bytes to itself, so a day of large files never keeps a person from
/// being asked to approve a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pool {
    /// Messages: their bodies, and their files with names and types.
    Messages,
    /// Approvals asked of the person: the texts kept of each.
    Approvals,
}

pub(super) struct Quotas {
    /// Bytes one person may store a UTC day in each pool; 0 is no limit.
    bytes_per_day: u64,
    /// Distinct senders the shared token may name.
    shared_senders: usize,
    /// Bytes stored, by person: (the day, the bytes) for each [`Pool`], in
    /// its order.
    spent: Mutex<HashMap<Handle, [(Millis, u64); 2]>>,
    /// The senders the shared token has named.
    named: Mutex<HashSet<Handle>>,
    /// How many client registrations are stored an hour.
    budgets: RegistrationBudgets,
    /// Client registrations stored this hour.
    registrations: Mutex<Registered>,
    /// Networks a client completed a grant from, and when it last did.
    known: Mutex<HashMap<IpAddr, Millis>>,
}

impl Quotas {
    pub(super) fn new(
        bytes_per_day: u64,
        shared_senders: usize,
        budgets: RegistrationBudgets,
    ) -> Quotas {
        Quotas {
            bytes_per_day,
            shared_senders,
            spent: Mutex::default(),
            named: Mutex::default(),
            budgets,
            registrations: Mutex::default(),
            known: Mutex::default(),
        }
    }

    /// Counts a client registration from `from` about to be stored,
    /// within its network's budget and the relay's (the known networks',
    /// then the strangers', for a network a client completed a grant
    /// from). A refusal spends nothing.
    pub(super) fn registration(&self, from: IpAddr, now: Millis) -> RelayResult<()> {
        let network = network_group(from);
        let known = self.is_known(network, now);
        let hour = now.div_euclid(HOUR_MILLIS);
        let retry_after = Duration::from_millis(((hour + 1) * HOUR_MILLIS - now).max(1000) as u64);
        let budgets = self.budgets;
        let mut guard = self.registrations.lock().expect("quota lock");
        let registered = &mut *guard;
        if registered.hour != hour {
            *registered = Registered {
                hour,
                ..Registered::default()
            };
        }
        let from_network = registered.by_network.get(&network).copied().unwrap_or(0);
        if from_network >= budgets.per_network {
            return Err(RelayError::Quota {
                message: format!(
                    "this relay has registered {} clients from this network (its IPv4 /24 or \
                     IPv6 /48) this hour, the most it does from one: try again later",
                    budgets.per_network
                ),
                retry_after,
            });
        }
        if known && registered.known < budgets.known {
            registered.known += 1;
        } else if registered.strangers < budgets.strangers {
            registered.strangers += 1;
        } else {
            let message = match known {
                true => format!(
                    "this relay has registered {} clients this hour for networks clients have \
                     signed in from, and {} for others, the most it does: try again later",
                    budgets.known, budgets.strangers
                ),
                false => format!(
                    "this relay has registered {} clients this hour for networks no client has \
                     signed in from, the most it does: try again later",
                    budgets.strangers
                ),
            };
            return Err(RelayError::Quota {
                message,
                retry_after,
            });
        }
        *registered.by_network.entry(network).or_default() += 1;
        Ok(())
    }

    /// Remembers that a client completed a grant from `from`: its network
    /// may register from the known networks' budget for [`KNOWN_FOR`].
    pub(super) fn granted(&self, from: IpAddr, now: Millis) {
        let network = network_group(from);
        let mut known = self.known.lock().expect("quota lock");
        if !known.contains_key(&network) && known.len() >= KNOWN_NETWORKS {
            let since = now.saturating_sub(known_for_millis());
            known.retain(|_, last| *last > since);
            if known.len() >= KNOWN_NETWORKS {
                let oldest = known.iter().min_by_key(|(_, last)| **last).map(|(n, _)| *n);
                if let Some(oldest) = oldest {
                    known.remove(&oldest);
                }
            }
        }
        known.insert(network, now);
    }

    /// Whether a client completed a grant from `network` in [`KNOWN_FOR`].
    fn is_known(&self, network: IpAddr, now: Millis) -> bool {
        let known = self.known.lock().expect("quota lock");
        known
            .get(&network)
            .is_some_and(|last| *last > now.saturating_sub(known_for_millis()))
    }

    /// Refuses `bytes` to store for `sender` in `pool` that would pass
    /// today's quota.
    pub(super) fn check_bytes(
        &self,
        sender: &Handle,
        pool: Pool,
        bytes: usize,
        now: Millis,
    ) -> RelayResult<()> {
        if self.bytes_per_day == 0 {
            return Ok(());
        }
        let today = now.div_euclid(DAY_MILLIS);
        let spent = self.spent_today(sender, pool, today);
        if spent.saturating_add(bytes as u64) > self.bytes_per_day {
            let tomorrow = (today + 1) * DAY_MILLIS;
            let max = self.bytes_per_day;
            let message = match pool {
                Pool::Messages => format!(
                    "{sender} has sent {spent} bytes today; one person may send {max} a day"
                ),
                Pool::Approvals => format!(
                    "the approvals asked of {sender} today hold {spent} bytes; a person's may \
                     hold {max} a day"
                ),
            };
            return Err(RelayError::Quota {
                message: format!(
                    "{message} (RELAY_MAX_BYTES_PER_DAY). Try again after midnight UTC"
                ),
                retry_after: Duration::from_millis((tomorrow - now).max(1000) as u64),
            });
        }
        Ok(())
    }

    /// Counts `bytes` stored for `sender` in `pool`.
    pub(super) fn spend(&self, sender: &Handle, pool: Pool, bytes: usize, now: Millis) {
        if self.bytes_per_day == 0 {
            return;
        }
        let today = now.div_euclid(DAY_MILLIS);
        let mut spent = self.spent.lock().expect("quota lock");
        if spent.len() > PRUNE_ABOVE {
            spent.retain(|_, pools| pools.iter().any(|(day, _)| *day == today));
        }
        let (day, total) = &mut spent.entry(sender.clone()).or_default()[pool as usize];
        if *day != today {
            (*day, *total) = (today, 0);
        }
        *total = total.saturating_add(bytes as u64);
    }

    /// Bytes stored for `sender` in `pool` on the UTC day `today`.
    fn spent_today(&self, sender: &Handle, pool: Pool, today: Millis) -> u64 {
        let spent = self.spent.lock().expect("quota lock");
        match spent.get(sender).map(|pools| pools[pool as usize]) {
            Some((day, bytes)) if day == today => bytes,
            _ => 0,
        }
    }

    /// Lets the shared token act as `sender`, within its cap of names.
    pub(super) fn shared_sender(&self, sender: &Handle) -> RelayResult<()> {
        let mut named = self.named.lock().expect("quota lock");
        if named.contains(sender) || named.len() < self.shared_senders {
            named.insert(sender.clone());
            return Ok(());
        }
        Err(RelayError::Forbidden(format!(
            "the shared token has already named {} different senders, the most it may \
             (RELAY_MAX_SHARED_SENDERS): use a name it has used, or give each agent a token of \
             its own (crosstalk add)",
            self.shared_senders
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::{HOUR_MILLIS, KNOWN_NETWORKS, Quotas, RegistrationBudgets, known_for_millis};
    use crate::model::Millis;
    use crate::relay::RelayError;
    use std::net::IpAddr;

    fn ip(raw: &str) -> IpAddr {
        raw.parse().unwrap()
    }

    fn budgets(per_network: u32, strangers: u32, known: u32) -> RegistrationBudgets {
        RegistrationBudgets {
            per_network,
            strangers,
            known,
        }
    }

    #[test]
    fn the_relay_stores_so_many_registrations_an_hour_and_no_more() {
        let quotas = Quotas::new(0, 1, budgets(1, 5, 0));
        let hour = 500_000 * HOUR_MILLIS;
        for n in 0..5 {
            quotas
                .registration(ip(&format!("198.51.{n}.1")), hour + 10)
                .unwrap();
        }
        let refused = quotas
            .registration(ip("203.0.113.1"), hour + 20)
            .unwrap_err();
        match refused {
            RelayError::Quota { retry_after, .. } => {
                assert_eq!(retry_after.as_millis(), (HOUR_MILLIS - 20) as u128);
            }
            other => panic!("{other:?}"),
        }
        assert!(
            quotas
                .registration(ip("203.0.113.1"), hour + HOUR_MILLIS)
                .is_ok(),
            "a new hour"
        );
    }

    #[test]
    fn a_network_spends_its_own_budget_and_a_refusal_spends_nothing() {
        let quotas = Quotas::new(0, 1, budgets(2, 3, 0));
        let hour = 500_000 * HOUR_MILLIS;
        quotas.registration(ip("203.0.113.1"), hour).unwrap();
        quotas.registration(ip("203.0.113.200"), hour).unwrap();
        assert!(quotas.registration(ip("203.0.113.3"), hour).is_err());
        // The refusals left the relay's budget as it was: one more stranger.
        quotas.registration(ip("198.51.100.1"), hour).unwrap();
        assert!(quotas.registration(ip("192.0.2.1"), hour).is_err());
    }

    #[test]
    fn a_network_that_completed_a_grant_draws_from_a_budget_strangers_cannot_spend() {
        let quotas = Quotas::new(0, 1, budgets(10, 1, 2));
        let hour = 500_000 * HOUR_MILLIS;
        quotas.granted(ip("192.0.2.10"), hour);
        quotas.registration(ip("198.51.100.1"), hour).unwrap();
        assert!(quotas.registration(ip("203.0.113.1"), hour).is_err());
        quotas.registration(ip("192.0.2.99"), hour).unwrap();
        quotas.registration(ip("192.0.2.99"), hour).unwrap();
        assert!(quotas.registration(ip("192.0.2.99"), hour).is_err());
        // Known no more once its grant is old.
        let later = hour + known_for_millis() + HOUR_MILLIS;
        quotas.registration(ip("198.51.100.1"), later).unwrap();
        assert!(quotas.registration(ip("192.0.2.99"), later).is_err());
    }

    #[test]
    fn the_known_networks_are_bounded() {
        let quotas = Quotas::new(0, 1, RegistrationBudgets::default());
        for n in 0..=KNOWN_NETWORKS as u32 {
            quotas.granted(IpAddr::from((n << 8).to_be_bytes()), Millis::from(n) + 1);
        }
        let known = quotas.known.lock().unwrap();
        assert_eq!(known.len(), KNOWN_NETWORKS);
        assert!(
            !known.contains_key(&IpAddr::from([0, 0, 0, 0])),
            "the oldest went"
        );
    }
}
