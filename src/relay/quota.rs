//! Quotas an attacker cannot turn against the team: bytes a person may
//! store a day, how many senders the shared token may name, and how many
//! OAuth clients may register an hour.
//!
//! Both are kept in memory: a restart forgets what was spent today, which
//! errs on the side of the team. The byte quota bounds the disk one
//! credential can fill (20 posts a second of 64 KiB would be 110 GB a
//! day); the sender cap bounds the presence rows and inbox topics the
//! shared token can make up.

use super::{RelayError, RelayResult};
use crate::model::{Handle, Millis};
use std::{
    collections::{HashMap, HashSet},
    sync::Mutex,
    time::Duration,
};

const DAY_MILLIS: Millis = 86_400_000;
const HOUR_MILLIS: Millis = 3_600_000;
/// OAuth client registrations the relay stores in an hour, from everyone:
/// it bounds the rows a flood of registrations leaves (each kept a day
/// unless used). Only registrations that pass every check count, so a
/// flood of refused ones spends none of it; each address has a budget of
/// its own besides (`layers/limits.rs`).
pub const REGISTRATIONS_PER_HOUR: u32 = 200;
/// Past this many senders, the map forgets those who sent nothing today.
const PRUNE_ABOVE: usize = 4096;

pub(super) struct Quotas {
    /// Bytes of bodies one person may store a UTC day; 0 is no limit.
    bytes_per_day: u64,
    /// Distinct senders the shared token may name.
    shared_senders: usize,
    /// Bytes stored today, by sender: (the day, the bytes).
    spent: Mutex<HashMap<Handle, (Millis, u64)>>,
    /// The senders the shared token has named.
    named: Mutex<HashSet<Handle>>,
    /// Client registrations stored this hour: (the hour, how many).
    registrations: Mutex<(Millis, u32)>,
}

impl Quotas {
    pub(super) fn new(bytes_per_day: u64, shared_senders: usize) -> Quotas {
        Quotas {
            bytes_per_day,
            shared_senders,
            spent: Mutex::default(),
            named: Mutex::default(),
            registrations: Mutex::default(),
        }
    }

    /// Counts a client registration about to be stored, within the
    /// relay's hourly budget.
    pub(super) fn registration(&self, now: Millis) -> RelayResult<()> {
        let hour = now.div_euclid(HOUR_MILLIS);
        let mut registrations = self.registrations.lock().expect("quota lock");
        if registrations.0 != hour {
            *registrations = (hour, 0);
        }
        if registrations.1 >= REGISTRATIONS_PER_HOUR {
            return Err(RelayError::Quota {
                message: format!(
                    "this relay has registered {REGISTRATIONS_PER_HOUR} clients this hour, the \
                     most it does: try again later"
                ),
                retry_after: Duration::from_millis(
                    ((hour + 1) * HOUR_MILLIS - now).max(1000) as u64
                ),
            });
        }
        registrations.1 += 1;
        Ok(())
    }

    /// Refuses a body of `bytes` from `sender` that would pass today's quota.
    pub(super) fn check_bytes(
        &self,
        sender: &Handle,
        bytes: usize,
        now: Millis,
    ) -> RelayResult<()> {
        if self.bytes_per_day == 0 {
            return Ok(());
        }
        let today = now.div_euclid(DAY_MILLIS);
        let spent = self.spent_today(sender, today);
        if spent.saturating_add(bytes as u64) > self.bytes_per_day {
            let tomorrow = (today + 1) * DAY_MILLIS;
            return Err(RelayError::Quota {
                message: format!(
                    "{sender} has sent {spent} bytes today; one person may send {} a day \
                     (RELAY_MAX_BYTES_PER_DAY). Try again after midnight UTC",
                    self.bytes_per_day
                ),
                retry_after: Duration::from_millis((tomorrow - now).max(1000) as u64),
            });
        }
        Ok(())
    }

    /// Counts a stored body of `bytes` from `sender`.
    pub(super) fn spend(&self, sender: &Handle, bytes: usize, now: Millis) {
        if self.bytes_per_day == 0 {
            return;
        }
        let today = now.div_euclid(DAY_MILLIS);
        let total = self.spent_today(sender, today).saturating_add(bytes as u64);
        let mut spent = self.spent.lock().expect("quota lock");
        if spent.len() > PRUNE_ABOVE {
            spent.retain(|_, (day, _)| *day == today);
        }
        spent.insert(sender.clone(), (today, total));
    }

    /// Bytes `sender` has stored on the UTC day `today`.
    fn spent_today(&self, sender: &Handle, today: Millis) -> u64 {
        match self.spent.lock().expect("quota lock").get(sender) {
            Some((day, spent)) if *day == today => *spent,
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
    use super::{HOUR_MILLIS, Quotas, REGISTRATIONS_PER_HOUR};

    #[test]
    fn the_relay_stores_so_many_registrations_an_hour_and_no_more() {
        let quotas = Quotas::new(0, 1);
        let hour = 500_000 * HOUR_MILLIS;
        for _ in 0..REGISTRATIONS_PER_HOUR {
            quotas.registration(hour + 10).unwrap();
        }
        let refused = quotas.registration(hour + 20).unwrap_err();
        match refused {
            crate::relay::RelayError::Quota { retry_after, .. } => {
                assert_eq!(retry_after.as_millis(), (HOUR_MILLIS - 20) as u128);
            }
            other => panic!("{other:?}"),
        }
        assert!(
            quotas.registration(hour + HOUR_MILLIS).is_ok(),
            "a new hour"
        );
    }
}
