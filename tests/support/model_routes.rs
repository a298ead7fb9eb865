//! Per-conversation scripts for [`ModelServer`] (issue 16): child agents running in parallel
//! each follow their own script. A route is a marker and its replies; a request whose first
//! user message contains the marker consumes the route's next reply, any other request the
//! default script's. Each request records which route served it and, with its arrival time
//! ([`Request::at`]), the time its answer was written ([`Request::done`]), so a test can see
//! whether two conversations' requests overlapped.

use std::collections::VecDeque;

use serde_json::Value;

use super::{ModelServer, Personality, Reply, Request, Script};

/// One conversation's script.
#[derive(Debug, Default)]
pub(super) struct Route {
    marker: String,
    replies: VecDeque<Reply>,
}

impl ModelServer {
    /// A server whose `routes` (marker, replies) each serve the requests whose first user
    /// message contains the marker (the first matching route wins), and `default` every
    /// other request. A route's exhausted script is answered 500, like the default's.
    pub fn start_routed(routes: Vec<(&str, Vec<Reply>)>, default: Vec<Reply>) -> ModelServer {
        let server = ModelServer::start_with(Personality::OpenAi, None, default);
        server.lock().routes = routes
            .into_iter()
            .map(|(m, r)| Route {
                marker: m.to_owned(),
                replies: r.into(),
            })
            .collect();
        server
    }

    /// Appends a reply to the route of `marker`.
    pub fn push_routed(&self, marker: &str, reply: Reply) {
        let mut script = self.lock();
        match script.routes.iter_mut().find(|r| r.marker == marker) {
            Some(r) => r.replies.push_back(reply),
            None => panic!("model server: no route {marker:?}"),
        }
    }

    /// The chat-completions requests a route served, in arrival order (`None`: the default
    /// script's).
    pub fn routed(&self, marker: Option<&str>) -> Vec<Request> {
        self.completions()
            .into_iter()
            .filter(|r| r.route.as_deref() == marker)
            .collect()
    }
}

/// The next reply for `request`, from its route or the default script; records the route.
pub(super) fn next_reply(script: &mut Script, request: &mut Request) -> Option<Reply> {
    let first = first_user_text(&request.body);
    let route = script
        .routes
        .iter_mut()
        .find(|r| first.contains(r.marker.as_str()));
    match route {
        Some(r) => {
            request.route = Some(r.marker.clone());
            r.replies.pop_front()
        }
        None => script.replies.pop_front(),
    }
}

/// The text of the first user message of a chat-completions (or Messages) body.
pub fn first_user_text(body: &Value) -> String {
    let Some(first) = body["messages"]
        .as_array()
        .and_then(|ms| ms.iter().find(|m| m["role"] == "user"))
    else {
        return String::new();
    };
    match &first["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::tests::send;
    use super::*;

    fn chat(first_user: &str) -> String {
        json!({"model": "m", "stream": true, "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": [{"type": "text", "text": first_user}]},
            {"role": "user", "content": "later"}
        ]})
        .to_string()
    }

    #[test]
    fn each_conversation_follows_its_own_route_and_the_rest_the_default() {
        let server = ModelServer::start_routed(
            vec![
                ("[A]", vec![Reply::text("a1"), Reply::text("a2")]),
                ("[B]", vec![Reply::text("b1")]),
            ],
            vec![Reply::text("root")],
        );
        let path = "/v1/chat/completions";
        assert_eq!(
            send(&server, "POST", path, &chat("task [B]")).content(),
            "b1"
        );
        assert_eq!(
            send(&server, "POST", path, &chat("task [A]")).content(),
            "a1"
        );
        assert_eq!(
            send(&server, "POST", path, &chat("hello")).content(),
            "root"
        );
        assert_eq!(
            send(&server, "POST", path, &chat("[A] again")).content(),
            "a2"
        );
        assert_eq!(send(&server, "POST", path, &chat("[B]")).status, 500);
        let routes: Vec<Option<String>> =
            server.completions().into_iter().map(|r| r.route).collect();
        assert_eq!(
            routes,
            [Some("[B]"), Some("[A]"), None, Some("[A]"), Some("[B]")]
                .map(|r| r.map(str::to_owned))
        );
        assert_eq!(server.routed(Some("[A]")).len(), 2);
        // The answer time is recorded just after the last byte went out: the client may have
        // read it a moment before.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while server.completions().iter().any(|r| r.done.is_none())
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(
            server
                .completions()
                .iter()
                .all(|r| r.done.is_some_and(|d| d >= r.at))
        );
    }
}
