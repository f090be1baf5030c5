//! Quotas an attacker cannot turn against the team: bytes a person may
//! store a day, and how many senders the shared token may name.
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
}

impl Quotas {
    pub(super) fn new(bytes_per_day: u64, shared_senders: usize) -> Quotas {
        Quotas {
            bytes_per_day,
            shared_senders,
            spent: Mutex::default(),
            named: Mutex::default(),
        }
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
