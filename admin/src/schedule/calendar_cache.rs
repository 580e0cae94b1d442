//! The calendars the scan decides with: read from the store once and kept compiled, so a fire
//! costs no database read. A change through this admin's API marks the cache stale at once
//! (the flag `AdminContext::calendars_changed`); a change made through another admin is
//! picked up within [`REFRESH_MS`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use chrono_tz::Tz;

use crate::model::CalendarBook;
use crate::store::{Store, StoreResult};

/// How old the cached calendars may get before the scan reads them again (one small query).
pub const REFRESH_MS: i64 = 10_000;

/// The compiled calendars and when they were read.
pub struct CalendarCache {
    held: Mutex<Option<(Arc<CalendarBook>, i64)>>,
    /// Set by the API when a calendar was created, changed or deleted.
    changed: Arc<AtomicBool>,
}

impl CalendarCache {
    pub fn new(changed: Arc<AtomicBool>) -> CalendarCache {
        CalendarCache {
            held: Mutex::new(None),
            changed,
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Option<(Arc<CalendarBook>, i64)>> {
        // Replaced whole; a poisoned lock holds consistent data.
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The calendars to decide this round's fires with: the cached ones while fresh, else read
    /// again (a failed read leaves the cache stale, so the next round tries again).
    pub async fn current(
        &self,
        store: &Store,
        now_ms: i64,
        default_tz: Tz,
    ) -> StoreResult<Arc<CalendarBook>> {
        let changed = self.changed.swap(false, Ordering::AcqRel);
        if !changed
            && let Some((book, read_at)) = self.held().as_ref()
            && now_ms - read_at < REFRESH_MS
            && now_ms >= *read_at
        {
            return Ok(Arc::clone(book));
        }
        match store.list_calendars().await {
            Ok(calendars) => {
                let book = Arc::new(CalendarBook::build(&calendars, default_tz));
                *self.held() = Some((Arc::clone(&book), now_ms));
                Ok(book)
            }
            Err(error) => {
                if changed {
                    self.changed.store(true, Ordering::Release);
                }
                Err(error)
            }
        }
    }
}
