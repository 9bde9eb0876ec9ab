//! The node's one way to take a `std::sync::Mutex` (its caches, indexes and counters).

use std::sync::{Mutex, MutexGuard};

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave the cache half-updated in a way that matters
    // more than losing the node; keep serving.
    m.lock().unwrap_or_else(|e| e.into_inner())
}
