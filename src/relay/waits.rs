//! Counting open waits and streams, per caller and in total.
//!
//! Each long-poll, waiting tool call and stream holds a [`WaitSlot`] while it
//! is open, so one caller cannot tie up the relay with thousands of them.

use super::RelayError;
use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

pub struct WaitSlots {
    per_caller: usize,
    total: usize,
    /// Open slots in total, and by caller.
    open: Mutex<(usize, HashMap<String, usize>)>,
}

/// An open wait or stream; closing it (dropping) frees the slot.
pub struct WaitSlot {
    slots: Arc<WaitSlots>,
    key: String,
}

impl WaitSlots {
    pub fn new(per_caller: usize, total: usize) -> Arc<WaitSlots> {
        Arc::new(WaitSlots {
            per_caller,
            total,
            open: Mutex::new((0, HashMap::new())),
        })
    }

    /// Takes a slot for `key`, or says why there is none.
    pub fn acquire(self: &Arc<Self>, key: &str) -> Result<WaitSlot, RelayError> {
        let mut open = self.open.lock().expect("wait slots lock");
        let (total, by_caller) = &mut *open;
        if by_caller.get(key).copied().unwrap_or(0) >= self.per_caller {
            return Err(RelayError::TooManyWaits(format!(
                "{key} already has {} waits and streams open, the most one caller may; \
                 close one before opening another",
                self.per_caller
            )));
        }
        if *total >= self.total {
            return Err(RelayError::Overloaded(format!(
                "the relay has {} waits and streams open, its limit; try again shortly",
                self.total
            )));
        }
        *by_caller.entry(key.to_owned()).or_insert(0) += 1;
        *total += 1;
        Ok(WaitSlot {
            slots: self.clone(),
            key: key.to_owned(),
        })
    }

    /// Waits and streams open now.
    pub fn open(&self) -> usize {
        self.open.lock().expect("wait slots lock").0
    }
}

impl Drop for WaitSlot {
    fn drop(&mut self) {
        let mut open = self.slots.open.lock().expect("wait slots lock");
        let (total, by_caller) = &mut *open;
        *total -= 1;
        if let Some(mine) = by_caller.get_mut(&self.key) {
            *mine -= 1;
            if *mine == 0 {
                by_caller.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_capped_per_caller_and_in_total_and_freed_on_drop() {
        let slots = WaitSlots::new(2, 3);
        let a1 = slots.acquire("alice").unwrap();
        let _a2 = slots.acquire("alice").unwrap();
        assert!(matches!(
            slots.acquire("alice"),
            Err(RelayError::TooManyWaits(_))
        ));
        let _b1 = slots.acquire("bob").unwrap();
        assert!(matches!(
            slots.acquire("carol"),
            Err(RelayError::Overloaded(_))
        ));
        drop(a1);
        assert_eq!(slots.open(), 2);
        let _c1 = slots.acquire("carol").unwrap();
    }
}
