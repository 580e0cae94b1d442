//! The name → handler table the runner looks BEAN handlers up in, with the glue runners the
//! executor enabled (GLUE runs have no name: their type picks the runner).

use std::collections::BTreeMap;
use std::fmt;

use xjob_proto::pb;

use crate::glue::GlueRunners;
use crate::handler::HandlerFn;

/// The BEAN handlers of an executor, by name, and its enabled glue runners.
#[derive(Clone, Default)]
pub(crate) struct HandlerRegistry {
    handlers: BTreeMap<String, HandlerFn>,
    glue: GlueRunners,
}

impl HandlerRegistry {
    /// Adds a handler; returns false when the name was already taken.
    pub(crate) fn insert(&mut self, name: String, handler: HandlerFn) -> bool {
        if self.handlers.contains_key(&name) {
            return false;
        }
        self.handlers.insert(name, handler);
        true
    }

    pub(crate) fn get(&self, name: &str) -> Option<HandlerFn> {
        self.handlers.get(name).cloned()
    }

    /// Sets the glue runners (the languages the executor enabled).
    pub(crate) fn set_glue(&mut self, glue: GlueRunners) {
        self.glue = glue;
    }

    /// Returns the runner of a glue type the executor enabled.
    pub(crate) fn glue(&self, glue_type: pb::GlueType) -> Option<HandlerFn> {
        self.glue.get(glue_type)
    }

    /// Returns the handler names, sorted (sent in `Register`).
    pub(crate) fn names(&self) -> Vec<String> {
        self.handlers.keys().cloned().collect()
    }
}

impl fmt::Debug for HandlerRegistry {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("HandlerRegistry")
            .field("handlers", &self.handlers.keys())
            .field("glue", &self.glue)
            .finish()
    }
}
