//! The tool registry: which tools exist, in registration order, and which provider service runs
//! each one. Registration is all or nothing (a batch with one clashing name registers nothing).

use std::sync::{Mutex, MutexGuard};

use keel_plugin_api::sdk::{Error, Result};
use keel_plugin_api::services::tools::{ToolCode, ToolDefinition};

/// `register` with a name that is already taken (or repeated in the same request).
pub const DUPLICATE_TOOL: ToolCode = ToolCode::DuplicateTool;
/// `register` with a malformed definition (name not `[A-Za-z0-9_-]{1,64}`, parameters not an
/// object schema) or an empty service name.
pub const INVALID_TOOL_DEFINITION: ToolCode = ToolCode::InvalidToolDefinition;
/// `unregister` with an id that is not registered.
pub const UNKNOWN_REGISTRATION: ToolCode = ToolCode::UnknownRegistration;

/// A registered tool and the provider service that runs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The definition as registered.
    pub definition: ToolDefinition,
    /// Provider service (`keel.tool.<row>`).
    pub service: String,
}

struct Group {
    id: u64,
    service: String,
    tools: Vec<ToolDefinition>,
}

#[derive(Default)]
struct Inner {
    next_id: u64,
    groups: Vec<Group>,
}

/// The registry (shared by the service methods and the pipeline).
#[derive(Default)]
pub struct Registry {
    inner: Mutex<Inner>,
}

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A poisoned lock only means another thread panicked mid-update; every update is a
        // single push/remove, so the data is whole.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers `tools` for `service`; returns the registration id.
    ///
    /// # Errors
    /// `DUPLICATE_TOOL`, `INVALID_TOOL_DEFINITION`; nothing is registered then.
    pub fn register(&self, service: &str, tools: Vec<ToolDefinition>) -> Result<u64> {
        if service.is_empty() {
            return Err(Error::coded(
                INVALID_TOOL_DEFINITION,
                "service must not be empty",
            ));
        }
        for (i, t) in tools.iter().enumerate() {
            if !valid_name(&t.name) {
                return Err(Error::coded(
                    INVALID_TOOL_DEFINITION,
                    format!("tool name '{}' is not [A-Za-z0-9_-]{{1,64}}", t.name),
                ));
            }
            if !t.parameters.is_object() {
                return Err(Error::coded(
                    INVALID_TOOL_DEFINITION,
                    format!("tool '{}': parameters must be a JSON Schema object", t.name),
                ));
            }
            if tools.iter().take(i).any(|o| o.name == t.name) {
                return Err(Error::coded(
                    DUPLICATE_TOOL,
                    format!("tool '{}' appears twice in one registration", t.name),
                ));
            }
        }
        let mut inner = self.lock();
        for t in &tools {
            if let Some(g) = inner
                .groups
                .iter()
                .find(|g| g.tools.iter().any(|o| o.name == t.name))
            {
                return Err(Error::coded(
                    DUPLICATE_TOOL,
                    format!("tool '{}' is already registered by '{}'", t.name, g.service),
                ));
            }
        }
        inner.next_id += 1;
        let id = inner.next_id;
        inner.groups.push(Group {
            id,
            service: service.to_owned(),
            tools,
        });
        Ok(id)
    }

    /// Removes a registration.
    ///
    /// # Errors
    /// `UNKNOWN_REGISTRATION`.
    pub fn unregister(&self, id: u64) -> Result<()> {
        let mut inner = self.lock();
        let before = inner.groups.len();
        inner.groups.retain(|g| g.id != id);
        if inner.groups.len() == before {
            return Err(Error::coded(
                UNKNOWN_REGISTRATION,
                format!("no registration {id}"),
            ));
        }
        Ok(())
    }

    /// Every definition, in registration order.
    pub fn list(&self) -> Vec<ToolDefinition> {
        self.lock()
            .groups
            .iter()
            .flat_map(|g| g.tools.iter().cloned())
            .collect()
    }

    /// Every tool name, in registration order.
    pub fn names(&self) -> Vec<String> {
        self.lock()
            .groups
            .iter()
            .flat_map(|g| g.tools.iter().map(|t| t.name.clone()))
            .collect()
    }

    /// The tool called `name`.
    pub fn lookup(&self, name: &str) -> Option<Entry> {
        self.lock().groups.iter().find_map(|g| {
            g.tools.iter().find(|t| t.name == name).map(|t| Entry {
                definition: t.clone(),
                service: g.service.clone(),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn def(name: &str) -> ToolDefinition {
        ToolDefinition {
            name: name.into(),
            description: format!("{name} things"),
            parameters: json!({"type": "object"}),
            parallel_safe: false,
            mutating: false,
            child_only: false,
        }
    }

    fn names(r: &Registry) -> Vec<String> {
        r.names()
    }

    #[test]
    fn register_lists_in_registration_order_and_looks_up_the_service() {
        let r = Registry::new();
        r.register("keel.tool.fs", vec![def("read_file"), def("write_file")])
            .unwrap();
        r.register("keel.tool.shell", vec![def("shell")]).unwrap();
        assert_eq!(names(&r), ["read_file", "write_file", "shell"]);
        let e = r.lookup("shell").unwrap();
        assert_eq!(e.service, "keel.tool.shell");
        assert_eq!(e.definition, def("shell"));
        assert!(r.lookup("nope").is_none());
        assert_eq!(r.list().len(), 3);
    }

    #[test]
    fn register_is_all_or_nothing_on_duplicates() {
        let r = Registry::new();
        r.register("keel.tool.fs", vec![def("read_file")]).unwrap();
        let err = r
            .register("keel.tool.x", vec![def("grep"), def("read_file")])
            .unwrap_err();
        assert!(err.is(DUPLICATE_TOOL));
        assert_eq!(names(&r), ["read_file"]);
        let err = r
            .register("keel.tool.x", vec![def("grep"), def("grep")])
            .unwrap_err();
        assert!(err.is(DUPLICATE_TOOL));
        assert_eq!(names(&r), ["read_file"]);
    }

    #[test]
    fn register_refuses_malformed_definitions() {
        let r = Registry::new();
        for bad in ["", "has space", &"x".repeat(65)] {
            let err = r.register("keel.tool.x", vec![def(bad)]).unwrap_err();
            assert!(err.is(INVALID_TOOL_DEFINITION), "{bad:?}");
        }
        let mut d = def("ok");
        d.parameters = json!("string");
        assert!(
            r.register("keel.tool.x", vec![d])
                .unwrap_err()
                .is(INVALID_TOOL_DEFINITION)
        );
        assert!(
            r.register("", vec![def("ok")])
                .unwrap_err()
                .is(INVALID_TOOL_DEFINITION)
        );
        assert!(names(&r).is_empty());
    }

    #[test]
    fn unregister_frees_the_names() {
        let r = Registry::new();
        let id = r.register("keel.tool.fs", vec![def("read_file")]).unwrap();
        r.unregister(id).unwrap();
        assert!(names(&r).is_empty());
        assert!(r.unregister(id).unwrap_err().is(UNKNOWN_REGISTRATION));
        r.register("keel.tool.other", vec![def("read_file")])
            .unwrap();
        assert_eq!(r.lookup("read_file").unwrap().service, "keel.tool.other");
    }
}
