//! The JSON an XXL-JOB executor sends to its admin, and the answers it expects. Both lines are
//! read: 2.x to 3.2 (`ReturnT {code, msg, content}`, a callback body that is a bare array of
//! `{logId, logDateTim, handleCode, handleMsg}`) and the later one (`Response {code, msg, data}`,
//! `{callbackList: [...]}` with `logDateTime`). Answers carry both `content` and `data`, so
//! either client finds what it looks for.

use serde::{Deserialize, Serialize};

/// `api/registry` and `api/registryRemove`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RegistryParam {
    #[serde(default)]
    pub registry_group: String,
    #[serde(default)]
    pub registry_key: String,
    #[serde(default)]
    pub registry_value: String,
}

/// One run result of `api/callback`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CallbackItem {
    pub log_id: i64,
    #[serde(default)]
    pub handle_code: i32,
    #[serde(default)]
    pub handle_msg: Option<String>,
}

/// `api/callback`'s body: a bare array before 3.5, `{callbackList: [...]}` after.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum CallbackBody {
    List(Vec<CallbackItem>),
    Wrapped {
        #[serde(rename = "callbackList", default)]
        callback_list: Vec<CallbackItem>,
    },
}

impl CallbackBody {
    pub fn items(self) -> Vec<CallbackItem> {
        match self {
            CallbackBody::List(items) => items,
            CallbackBody::Wrapped { callback_list } => callback_list,
        }
    }
}

/// The answer envelope, with the payload under both names.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Answer {
    pub code: i32,
    pub msg: Option<String>,
    pub content: Option<String>,
    pub data: Option<String>,
}

impl Answer {
    pub fn success() -> Answer {
        Answer {
            code: 200,
            msg: None,
            content: None,
            data: None,
        }
    }

    pub fn fail(message: impl Into<String>) -> Answer {
        Answer {
            code: 500,
            msg: Some(message.into()),
            content: None,
            data: None,
        }
    }
}

/// Markers `xxl-job-core` puts in the result of a run it stopped (kill, COVER_EARLY): such a
/// result is recorded KILLED rather than FAILED.
pub fn reports_a_kill(message: &str) -> bool {
    message.contains("[job running, killed]") || message.contains("in the job queue, killed")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_callback_bodies_are_read() {
        let old: CallbackBody = serde_json::from_str(
            r#"[{"logId":5,"logDateTim":1,"handleCode":200,"handleMsg":"ok"}]"#,
        )
        .unwrap();
        assert_eq!(
            old.items(),
            vec![CallbackItem {
                log_id: 5,
                handle_code: 200,
                handle_msg: Some("ok".into())
            }]
        );
        let new: CallbackBody = serde_json::from_str(
            r#"{"callbackList":[{"logId":6,"logDateTime":1,"handleCode":500,"handleMsg":null}]}"#,
        )
        .unwrap();
        let items = new.items();
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].log_id, 6);
        assert_eq!(items[0].handle_code, 500);
    }

    #[test]
    fn registry_params_and_answers() {
        let param: RegistryParam = serde_json::from_str(
            r#"{"registryGroup":"EXECUTOR","registryKey":"app","registryValue":"http://h:9999/"}"#,
        )
        .unwrap();
        assert_eq!(param.registry_key, "app");
        let answer = serde_json::to_value(Answer::fail("no")).unwrap();
        assert_eq!(answer["code"], 500);
        assert_eq!(answer["msg"], "no");
        assert!(reports_a_kill(
            "scheduling center kill job. [job running, killed]"
        ));
        assert!(!reports_a_kill("failed on purpose"));
    }
}
