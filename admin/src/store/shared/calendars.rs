//! Calendars (`model::calendar`): rows of `xjob_calendar`, rules one per line, and the jobs
//! that name one.

use super::rows::calendar_from_row;
use crate::model::{Calendar, JobId};
use crate::store::StoreResult;
use crate::store::dialect::Dialect;
use crate::store::sql::{Pools, Sql};

const SELECT_CALENDAR: &str =
    "SELECT name, time_zone, rules, description, created_ms, updated_ms FROM xjob_calendar";

/// Inserts a calendar; a name taken already is `StoreError::Conflict`.
pub async fn insert_calendar<DB: Dialect>(
    db: Pools<'_, DB>,
    calendar: &Calendar,
) -> StoreResult<()> {
    Sql::<DB>::new(
        "INSERT INTO xjob_calendar (name, time_zone, rules, description, created_ms, updated_ms) \
         VALUES (",
    )
    .bind(calendar.name.as_str())
    .push(", ")
    .bind(calendar.time_zone.as_str())
    .push(", ")
    .bind(calendar.rules.join("\n"))
    .push(", ")
    .bind(calendar.description.as_str())
    .push(", ")
    .bind(calendar.created_ms)
    .push(", ")
    .bind(calendar.updated_ms)
    .push(")")
    .execute(&mut *db.write().await?)
    .await?;
    Ok(())
}

/// Replaces a calendar's zone, rules and description; false when there is none by its name.
pub async fn update_calendar<DB: Dialect>(
    db: Pools<'_, DB>,
    calendar: &Calendar,
) -> StoreResult<bool> {
    let updated = Sql::<DB>::new("UPDATE xjob_calendar SET time_zone = ")
        .bind(calendar.time_zone.as_str())
        .push(", rules = ")
        .bind(calendar.rules.join("\n"))
        .push(", description = ")
        .bind(calendar.description.as_str())
        .push(", updated_ms = ")
        .bind(calendar.updated_ms)
        .push(" WHERE name = ")
        .bind(calendar.name.as_str())
        .affected(&mut *db.write().await?)
        .await?;
    Ok(updated == 1)
}

pub async fn delete_calendar<DB: Dialect>(db: Pools<'_, DB>, name: &str) -> StoreResult<bool> {
    let deleted = Sql::<DB>::new("DELETE FROM xjob_calendar WHERE name = ")
        .bind(name)
        .affected(&mut *db.write().await?)
        .await?;
    Ok(deleted == 1)
}

pub async fn get_calendar<DB: Dialect>(
    db: Pools<'_, DB>,
    name: &str,
) -> StoreResult<Option<Calendar>> {
    let row = Sql::<DB>::new(SELECT_CALENDAR)
        .push(" WHERE name = ")
        .bind(name)
        .fetch_optional(&mut *db.read().await?)
        .await?;
    row.as_ref().map(calendar_from_row::<DB>).transpose()
}

/// Every calendar, by name (a handful: the scan compiles them all at each refresh).
pub async fn list_calendars<DB: Dialect>(db: Pools<'_, DB>) -> StoreResult<Vec<Calendar>> {
    let rows = Sql::<DB>::new(SELECT_CALENDAR)
        .push(" ORDER BY name")
        .fetch_all(&mut *db.read().await?)
        .await?;
    rows.iter().map(calendar_from_row::<DB>).collect()
}

/// Ids of the jobs naming calendar `name`, ascending.
pub async fn jobs_using_calendar<DB: Dialect>(
    db: Pools<'_, DB>,
    name: &str,
) -> StoreResult<Vec<JobId>> {
    let rows = Sql::<DB>::new("SELECT id FROM xjob_job WHERE calendar = ")
        .bind(name)
        .push(" ORDER BY id")
        .fetch_all(&mut *db.read().await?)
        .await?;
    rows.iter()
        .map(|row| {
            crate::store::sql::Cols::<DB>(row)
                .get::<i64>("id")
                .map(JobId)
        })
        .collect()
}
