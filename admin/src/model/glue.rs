//! Saved versions of a script job's source (XXL-JOB's GLUE history).

use super::{GlueType, JobId};

/// How many versions of a job's glue source are kept (XXL-JOB keeps 30 too).
pub const GLUE_VERSIONS_KEPT: i64 = 30;

/// One saved version of a job's glue source, newest has the highest id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlueVersion {
    pub id: i64,
    pub job_id: JobId,
    pub glue_type: GlueType,
    pub glue_source: String,
    pub glue_remark: String,
    pub created_ms: i64,
}

/// A new glue source for a job, saved as its current source and as a version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlueEdit {
    pub job_id: JobId,
    pub glue_type: GlueType,
    pub glue_source: String,
    pub glue_remark: String,
    pub now_ms: i64,
}

/// Why a job of `group` may not use `GLUE_GROOVY`, or `None` when it may. Groovy is Java
/// compiled inside an XXL-JOB executor (a JVM); xjob's executors cannot run it, so the job's
/// runs must go to XXL-JOB executors only: a MANUAL group listing every address as
/// `xxl-job+http://…`, or an AUTO group whose registered executors (`registered`, the app's
/// live executors) are all XXL-JOB ones. Checked when the job is written; an xjob executor that
/// joins an AUTO group later refuses such a run itself.
pub fn groovy_refusal(group: &super::Group, registered: &[super::ExecutorInfo]) -> Option<String> {
    use super::{AddressType, ExecutorProtocol};
    const WHY: &str = "GLUE_GROOVY runs only on XXL-JOB executors (Java compiled in their JVM)";
    let app = &group.app_name;
    match group.address_type {
        AddressType::Manual => {
            let grpc = group
                .addresses
                .iter()
                .find(|address| super::validate::xxl_listed_address(address).is_none())?;
            let shown = super::validate::short_prefix(grpc);
            Some(format!(
                "{WHY}; MANUAL group '{app}' lists '{shown}', an xjob (gRPC) address: list \
                 XXL-JOB executors as xxl-job+http://HOST:PORT"
            ))
        }
        AddressType::Auto => {
            if registered.is_empty() {
                return Some(format!(
                    "{WHY}; AUTO group '{app}' has no executor registered, so nothing shows \
                     its runs go to XXL-JOB executors: start them first"
                ));
            }
            let grpc = registered
                .iter()
                .find(|executor| executor.protocol != ExecutorProtocol::XxlJobHttp)?;
            let shown = super::validate::short_prefix(&grpc.address);
            Some(format!(
                "{WHY}; AUTO group '{app}' has an xjob executor registered at '{shown}'"
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AddressType, ExecutorInfo, ExecutorProtocol, Group};

    fn group(address_type: AddressType, addresses: &[&str]) -> Group {
        Group {
            id: crate::model::GroupId(1),
            app_name: "billing".into(),
            title: "Billing".into(),
            address_type,
            addresses: addresses
                .iter()
                .map(|address| address.to_string())
                .collect(),
            access_token: String::new(),
            updated_ms: 0,
        }
    }

    fn executor(address: &str, protocol: ExecutorProtocol) -> ExecutorInfo {
        ExecutorInfo {
            executor_id: address.into(),
            app_name: "billing".into(),
            address: address.into(),
            handlers: Vec::new(),
            registered_ms: 0,
            last_heartbeat_ms: 0,
            admin_node: String::new(),
            running_log_ids: Vec::new(),
            protocol,
        }
    }

    #[test]
    fn a_manual_group_takes_groovy_only_when_every_address_is_an_xxl_job_executor() {
        let xxl = group(
            AddressType::Manual,
            &[
                "xxl-job+http://10.0.0.5:9999",
                "xxl-job+http://10.0.0.6:9999/",
            ],
        );
        assert_eq!(groovy_refusal(&xxl, &[]), None);
        let mixed = group(
            AddressType::Manual,
            &["xxl-job+http://10.0.0.5:9999", "http://10.0.0.6:9999"],
        );
        let refusal = groovy_refusal(&mixed, &[]).expect("refused");
        assert!(refusal.contains("MANUAL group 'billing'"), "{refusal}");
        assert!(refusal.contains("'http://10.0.0.6:9999'"), "{refusal}");
        assert!(refusal.contains("xxl-job+http://HOST:PORT"), "{refusal}");
    }

    #[test]
    fn an_auto_group_takes_groovy_only_when_its_registered_executors_are_all_xxl_job_ones() {
        let auto = group(AddressType::Auto, &[]);
        let none = groovy_refusal(&auto, &[]).expect("refused");
        assert!(none.contains("no executor registered"), "{none}");
        let xxl = [
            executor("http://10.0.0.5:9999", ExecutorProtocol::XxlJobHttp),
            executor("http://10.0.0.6:9999", ExecutorProtocol::XxlJobHttp),
        ];
        assert_eq!(groovy_refusal(&auto, &xxl), None);
        let mixed = [
            xxl[0].clone(),
            executor("http://10.0.0.7:9999", ExecutorProtocol::Grpc),
        ];
        let refusal = groovy_refusal(&auto, &mixed).expect("refused");
        assert!(
            refusal.contains("xjob executor registered at 'http://10.0.0.7:9999'"),
            "{refusal}"
        );
    }
}
