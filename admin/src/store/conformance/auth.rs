//! JobAdmin users, API tokens (by hash), group grants, the audit trail, and the callback
//! targets the registry checks results against.

use super::*;
use crate::model::{ApiToken, AuditEntry, Role, User};

fn user(name: &str, role: Role) -> User {
    User {
        id: 0,
        name: name.to_string(),
        role,
        password_hash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA".to_string(),
        group_ids: Vec::new(),
        created_ms: 5,
    }
}

fn token(user_id: i64, hash: &str) -> ApiToken {
    ApiToken {
        id: 0,
        user_id,
        token_hash: hash.to_string(),
        prefix: "xjob_0123456".to_string(),
        description: "ci".to_string(),
        expires_ms: 9_000,
        revoked_ms: 0,
        created_ms: 10,
    }
}

#[tokio::test]
async fn users_tokens_and_grants_round_trip() {
    for (backend, store, _dir) in fresh_stores().await {
        assert_eq!(store.count_users().await.expect("count"), 0, "{backend}");
        let alice = store
            .insert_user(&user("alice", Role::Admin))
            .await
            .expect("alice");
        let bob = store
            .insert_user(&user("bob", Role::Viewer))
            .await
            .expect("bob");
        let taken = store.insert_user(&user("alice", Role::Viewer)).await;
        assert!(
            matches!(taken, Err(StoreError::Conflict(_))),
            "{backend}: {taken:?}"
        );
        assert_eq!(store.count_users().await.expect("count"), 2, "{backend}");

        let group_a = store.insert_group(&group("a")).await.expect("group").id;
        let group_b = store.insert_group(&group("b")).await.expect("group").id;
        store.grant_group(bob.id, group_b).await.expect("grant");
        store.grant_group(bob.id, group_a).await.expect("grant");
        store
            .grant_group(bob.id, group_a)
            .await
            .expect("granting twice");
        let read = store.get_user(bob.id).await.expect("get").expect("bob");
        assert_eq!(read.group_ids, vec![group_a, group_b], "{backend}");
        assert_eq!((read.name.as_str(), read.role), ("bob", Role::Viewer));
        assert!(store.revoke_group(bob.id, group_b).await.expect("revoke"));
        assert!(
            !store
                .revoke_group(bob.id, group_b)
                .await
                .expect("revoke again")
        );
        let users = store.list_users().await.expect("list");
        let listed: Vec<(&str, Vec<GroupId>)> = users
            .iter()
            .map(|user| (user.name.as_str(), user.group_ids.clone()))
            .collect();
        assert_eq!(
            listed,
            vec![("alice", vec![]), ("bob", vec![group_a])],
            "{backend}"
        );

        let stored = store
            .insert_token(&token(bob.id, "hash-1"))
            .await
            .expect("token");
        let found = store.token_by_hash("hash-1").await.expect("by hash");
        assert_eq!(found, Some(stored.clone()), "{backend}");
        assert_eq!(store.token_by_hash("hash-2").await.expect("by hash"), None);
        let duplicate = store.insert_token(&token(alice.id, "hash-1")).await;
        assert!(
            matches!(duplicate, Err(StoreError::Conflict(_))),
            "{backend}"
        );
        assert_eq!(
            store.revoke_token(stored.id, 77).await.expect("revoke"),
            Some(bob.id)
        );
        // A second revocation keeps the first time.
        store
            .revoke_token(stored.id, 99)
            .await
            .expect("revoke again");
        let tokens = store.list_tokens(bob.id).await.expect("tokens");
        assert_eq!(tokens.len(), 1);
        assert_eq!(tokens[0].revoked_ms, 77, "{backend}");
        assert_eq!(store.revoke_token(424_242, 1).await.expect("missing"), None);

        assert!(store.delete_user(bob.id).await.expect("delete"));
        assert!(!store.delete_user(bob.id).await.expect("delete again"));
        assert_eq!(
            store.token_by_hash("hash-1").await.expect("by hash"),
            None,
            "{backend}"
        );
        assert_eq!(store.get_user(bob.id).await.expect("get"), None);
        store.close().await;
    }
}

#[tokio::test]
async fn audit_pages_newest_first_and_prunes_by_age() {
    for (backend, store, _dir) in fresh_stores().await {
        for at_ms in [100, 200, 300, 400] {
            let entry = AuditEntry {
                id: 0,
                at_ms,
                actor: "alice".to_string(),
                call: "UpdateJob".to_string(),
                object: format!("job:{at_ms}"),
                summary: "name 'x'".to_string(),
            };
            store.insert_audit(&entry).await.expect("audit");
        }
        let page = store.list_audit(0, 3).await.expect("page");
        let times: Vec<i64> = page.iter().map(|entry| entry.at_ms).collect();
        assert_eq!(times, vec![400, 300, 200], "{backend}");
        assert_eq!(page[0].object, "job:400");
        let rest = store.list_audit(3, 3).await.expect("page");
        assert_eq!(rest.len(), 1, "{backend}");
        assert_eq!(
            store.prune_audit(300, 1).await.expect("prune"),
            1,
            "{backend}"
        );
        assert_eq!(
            store.prune_audit(300, 10).await.expect("prune"),
            1,
            "{backend}"
        );
        let left: Vec<i64> = store
            .list_audit(0, 10)
            .await
            .expect("page")
            .iter()
            .map(|entry| entry.at_ms)
            .collect();
        assert_eq!(left, vec![400, 300], "{backend}");
        store.close().await;
    }
}

#[tokio::test]
async fn callback_targets_name_status_address_app_and_token() {
    for (backend, store, _dir) in fresh_stores().await {
        let mut secured = group("secured");
        secured.access_token = "t0ken".to_string();
        let group = store.insert_group(&secured).await.expect("group");
        let job = store.insert_job(&job(group.id, 0)).await.expect("job");
        let ids = store
            .insert_runs(&[fire(&job, 1_000, "n1", 1), fire(&job, 2_000, "n1", 1)])
            .await
            .expect("runs");
        store
            .claim_runs(&ids[..1], &NodeIdentity::new("n1", 1), 1_000)
            .await
            .expect("claim");
        let targets = store
            .callback_targets(&[ids[0], ids[1], LogId(987_654)])
            .await
            .expect("targets");
        let seen: Vec<(LogId, RunStatus, &str, &str)> = targets
            .iter()
            .map(|target| {
                (
                    target.log_id,
                    target.status,
                    target.app_name.as_str(),
                    target.access_token.as_str(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            vec![
                (ids[0], RunStatus::Running, "secured", "t0ken"),
                (ids[1], RunStatus::Pending, "secured", "t0ken"),
            ],
            "{backend}"
        );
        store.close().await;
    }
}

#[tokio::test]
async fn console_sessions_and_users_by_name_round_trip() {
    use crate::model::ConsoleSession;
    for (backend, store, _dir) in fresh_stores().await {
        let carol = store
            .insert_user(&user("carol", Role::Operator))
            .await
            .expect("carol");
        let group_id = store.insert_group(&group("c")).await.expect("group").id;
        store.grant_group(carol.id, group_id).await.expect("grant");
        let found = store.user_by_name("carol").await.expect("by name");
        assert_eq!(
            found.map(|user| user.group_ids),
            Some(vec![group_id]),
            "{backend}"
        );
        assert_eq!(store.user_by_name("nobody").await.expect("by name"), None);

        let session = |hash: &str, user_id: i64, expires_ms: i64| ConsoleSession {
            token_hash: hash.to_string(),
            user_id,
            csrf_token: format!("csrf-{hash}"),
            created_ms: 100,
            expires_ms,
        };
        let live = session("live", carol.id, 10_000);
        store.insert_console_session(&live).await.expect("insert");
        store
            .insert_console_session(&session("open", 0, 500))
            .await
            .expect("insert an open session");
        let read = store.console_session("live").await.expect("read");
        assert_eq!(read.as_ref(), Some(&live), "{backend}");
        assert_eq!(store.console_session("nope").await.expect("read"), None);
        assert_eq!(
            store.prune_console_sessions(1_000).await.expect("prune"),
            1,
            "{backend}: only the expired session goes"
        );
        assert_eq!(store.console_session("open").await.expect("read"), None);
        store.delete_console_session("live").await.expect("logout");
        assert_eq!(store.console_session("live").await.expect("read"), None);
    }
}

#[tokio::test]
async fn role_and_password_changes_end_the_users_console_sessions() {
    use crate::model::ConsoleSession;
    for (backend, store, _dir) in fresh_stores().await {
        let dave = store
            .insert_user(&user("dave", Role::Viewer))
            .await
            .expect("dave");
        let erin = store
            .insert_user(&user("erin", Role::Viewer))
            .await
            .expect("erin");
        store
            .set_user_role(dave.id, Role::Operator)
            .await
            .expect("role");
        // The same role again is no error (MySQL reports no changed row).
        store
            .set_user_role(dave.id, Role::Operator)
            .await
            .expect("same role");
        let read = store.get_user(dave.id).await.expect("read").expect("dave");
        assert_eq!(read.role, Role::Operator, "{backend}");

        for (hash, user_id) in [("d1", dave.id), ("d2", dave.id), ("e1", erin.id)] {
            let session = ConsoleSession {
                token_hash: hash.to_string(),
                user_id,
                csrf_token: format!("csrf-{hash}"),
                created_ms: 100,
                expires_ms: 10_000,
            };
            store
                .insert_console_session(&session)
                .await
                .expect("insert");
        }
        store
            .set_user_password(dave.id, "new-hash")
            .await
            .expect("password");
        let read = store.get_user(dave.id).await.expect("read").expect("dave");
        assert_eq!(read.password_hash, "new-hash", "{backend}");
        for gone in ["d1", "d2"] {
            assert_eq!(
                store.console_session(gone).await.expect("read"),
                None,
                "{backend}: dave's session {gone} outlived the password"
            );
        }
        assert!(
            store.console_session("e1").await.expect("read").is_some(),
            "{backend}: another user's session stays"
        );
    }
}
