//! This admin's identity in the cluster.

/// The node id (configured) and epoch (a new one at every start, from the node table): every
/// fire this admin writes and every claim it makes carries both, so an admin that restarted, or
/// stalled past its lease, cannot act on fires it no longer owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeIdentity {
    pub node_id: String,
    pub epoch: i64,
}

impl NodeIdentity {
    pub fn new(node_id: impl Into<String>, epoch: i64) -> NodeIdentity {
        NodeIdentity {
            node_id: node_id.into(),
            epoch,
        }
    }
}
