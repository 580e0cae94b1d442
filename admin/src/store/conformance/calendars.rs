//! Calendars: round trip (rules one per line), unique names, and the jobs naming one.

use super::*;
use crate::model::{Calendar, CalendarMode};

fn holidays() -> Calendar {
    Calendar {
        name: "cn-holidays".into(),
        time_zone: "Asia/Shanghai".into(),
        rules: vec![
            "2026-10-01..2026-10-07".into(),
            "weekly sat,sun".into(),
            "cron 0 0 12 * * ?".into(),
        ],
        description: "National holidays, 国庆".into(),
        created_ms: 1_000,
        updated_ms: 2_000,
    }
}

#[tokio::test]
async fn calendars_round_trip_with_unique_names_and_know_their_jobs() {
    for (backend, store, _dir) in fresh_stores().await {
        let calendar = holidays();
        store.insert_calendar(&calendar).await.expect("insert");
        let loaded = store.get_calendar("cn-holidays").await.expect("get");
        assert_eq!(loaded.as_ref(), Some(&calendar), "{backend}");
        let duplicate = store.insert_calendar(&calendar).await;
        assert!(
            matches!(duplicate, Err(StoreError::Conflict(_))),
            "{backend}: {duplicate:?}"
        );
        let empty = Calendar {
            name: "empty".into(),
            rules: Vec::new(),
            time_zone: String::new(),
            description: String::new(),
            ..calendar.clone()
        };
        store.insert_calendar(&empty).await.expect("insert empty");
        assert_eq!(
            store.list_calendars().await.expect("list"),
            vec![calendar.clone(), empty.clone()],
            "{backend}: by name"
        );

        let edited = Calendar {
            rules: vec!["2027-01-01".into()],
            time_zone: "Europe/Berlin".into(),
            updated_ms: 3_000,
            ..calendar.clone()
        };
        assert!(store.update_calendar(&edited).await.expect("update"));
        let reloaded = store.get_calendar("cn-holidays").await.expect("get");
        assert_eq!(reloaded, Some(edited.clone()), "{backend}");
        let missing = Calendar {
            name: "nope".into(),
            ..edited.clone()
        };
        assert!(!store.update_calendar(&missing).await.expect("update"));

        // A job names a calendar by name and keeps its mode.
        let group = new_group(&store).await;
        let using = store
            .insert_job(&Job {
                calendar: "cn-holidays".into(),
                calendar_mode: CalendarMode::Only,
                ..job(group.id, 0)
            })
            .await
            .expect("job");
        let other = store.insert_job(&job(group.id, 0)).await.expect("job");
        let reloaded_job = store.get_job(using.id).await.expect("get").expect("job");
        assert_eq!(reloaded_job.calendar, "cn-holidays", "{backend}");
        assert_eq!(reloaded_job.calendar_mode, CalendarMode::Only, "{backend}");
        let plain = store.get_job(other.id).await.expect("get").expect("job");
        assert_eq!(
            (plain.calendar.as_str(), plain.calendar_mode),
            ("", CalendarMode::Skip),
            "{backend}: a job without a calendar"
        );
        assert_eq!(
            store
                .jobs_using_calendar("cn-holidays")
                .await
                .expect("jobs"),
            vec![using.id],
            "{backend}"
        );
        assert!(
            store
                .jobs_using_calendar("empty")
                .await
                .expect("jobs")
                .is_empty()
        );

        assert!(store.delete_calendar("empty").await.expect("delete"));
        assert!(!store.delete_calendar("empty").await.expect("delete"));
        assert_eq!(store.get_calendar("empty").await.expect("get"), None);
        store.close().await;
    }
}
