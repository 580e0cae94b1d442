//! An executor group: the app executors register under (XXL-JOB's `xxl_job_group`).

use super::{AddressType, GroupId};

/// An executor app and where its addresses come from.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub id: GroupId,
    pub app_name: String,
    pub title: String,
    pub address_type: AddressType,
    /// Typed addresses (MANUAL groups only), in the order given.
    pub addresses: Vec<String>,
    /// Token executors of this app must present; empty = none.
    pub access_token: String,
    pub updated_ms: i64,
}
