//! What the chat shows as things happen: the model's text as it streams (whole lines go to
//! the scrollback at once, the line being written stays live), tool calls while they run and
//! when they finish, unusual turn ends, approval questions and their answers, and the live
//! region (running calls, the line being written, a question, a notice, the status line, the
//! input line).

use futures::channel::oneshot;
use keel_plugin_api::events::agent::{DeltaData, DeltaKind};
use keel_plugin_api::events::approval::ApprovalQuestion;
use keel_plugin_api::services::approval::ApprovalOutcome;
use serde_json::Value;

use super::{Asking, Chat};
use crate::editor::Key;
use crate::transcript::{self, Call, key_argument};
use crate::view::{Line, Tone, wrap_once};

impl Chat {
    /// A piece of the model's stream.
    pub(super) fn on_delta(&mut self, step: u64, data: DeltaData) {
        if data.kind != DeltaKind::Text {
            return;
        }
        match self.streaming {
            Some((s, attempt)) if s == step && attempt != data.attempt => {
                // A retried request streams again from the start.
                self.end_stream();
                self.note(Line::new(Tone::Dim, "  (the request was retried)"));
            }
            _ => {}
        }
        self.streaming = Some((step, data.attempt));
        if self.frame.is_none() {
            if !data.text.is_empty() {
                (self.deps.out)(&data.text);
                self.open_line = !data.text.ends_with('\n');
            }
            return;
        }
        self.stream.push_str(&data.text);
        while let Some(at) = self.stream.find('\n') {
            let line: String = self.stream.drain(..=at).collect();
            self.commit_text(line.trim_end_matches(['\n', '\r']));
        }
        let width = self.frame.as_ref().map_or(80, |f| f.width);
        while let Some((head, rest)) = wrap_once(&self.stream, width) {
            self.note(Line::new(Tone::Plain, head));
            self.stream = rest;
        }
    }

    /// One whole line of the model's text, wrapped to the terminal's width.
    fn commit_text(&mut self, text: &str) {
        let Some(width) = self.frame.as_ref().map(|f| f.width) else {
            return self.note(Line::new(Tone::Plain, text));
        };
        let mut rest = text.to_owned();
        while let Some((head, tail)) = wrap_once(&rest, width) {
            self.note(Line::new(Tone::Plain, head));
            rest = tail;
        }
        self.note(Line::new(Tone::Plain, rest));
    }

    /// The step's stream ended: the line being written goes to the scrollback.
    pub(super) fn end_stream(&mut self) {
        if !self.stream.is_empty() {
            let rest = std::mem::take(&mut self.stream);
            self.commit_text(&rest);
        }
        if self.frame.is_none() && self.open_line {
            (self.deps.out)("\n");
            self.open_line = false;
        }
    }

    /// A committed session event.
    pub(super) fn on_logged(&mut self, kind: &str, record: &Value) {
        let data = record.get("data").cloned().unwrap_or(Value::Null);
        match kind {
            "assistant/message" => {
                let (text, usage) = transcript::assistant(&data);
                let streamed = self.streaming.take().is_some();
                self.end_stream();
                if !streamed && !text.is_empty() {
                    for line in text.lines() {
                        self.commit_text(line);
                    }
                    if self.frame.is_none() && !text.ends_with('\n') {
                        self.open_line = false;
                    }
                }
                if let Some((input, output)) = usage {
                    self.tokens.0 += input;
                    self.tokens.1 += output;
                }
            }
            "tool/call" => {
                if let Some(call) = Call::from_data(&data) {
                    if self.frame.is_none() {
                        self.note(Line::new(
                            Tone::Tool,
                            format!("  {} {}", call.name, call.key),
                        ));
                    }
                    self.calls.push(call);
                }
            }
            "tool/result" => {
                let id = data
                    .get("call_id")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if let Some(at) = self.calls.iter().position(|c| c.call_id == id) {
                    let call = self.calls.remove(at);
                    let line = call.finished(&data, call.started.elapsed());
                    self.note(line);
                }
            }
            "turn/end" => {
                self.end_stream();
                if let Some(line) = transcript::turn_end(&data) {
                    self.note(line);
                }
            }
            _ => {}
        }
    }

    /// A committed event of a child agent one of the running calls started: its steps,
    /// tokens and latest tool call join that call's live line.
    pub(super) fn on_child_logged(&mut self, session: &str, kind: &str, record: &Value) {
        let Some(child) = self
            .calls
            .iter_mut()
            .filter_map(|c| c.child.as_mut())
            .find(|c| c.session == session)
        else {
            return;
        };
        let data = record.get("data").cloned().unwrap_or(Value::Null);
        match kind {
            "assistant/message" => {
                child.steps += 1;
                if let (_, Some((input, output))) = transcript::assistant(&data) {
                    child.tokens += input + output;
                }
            }
            "tool/call" => {
                if let Some(call) = Call::from_data(&data) {
                    child.doing = Some(format!("{} {}", call.name, call.key));
                }
            }
            _ => {}
        }
    }

    /// An approval question: answered at once when the person said "always" for its rule,
    /// else shown until a key answers it.
    pub(super) fn on_ask(
        &mut self,
        question: ApprovalQuestion,
        reply: oneshot::Sender<ApprovalOutcome>,
    ) {
        if self.session.is_empty() {
            let _ = reply.send(ApprovalOutcome::Unavailable);
            return;
        }
        if self.always.contains(&rule_of(&question)) {
            self.note(Line::new(
                Tone::Dim,
                format!(
                    "  allowed {} {} (always, as you said for this rule)",
                    question.request.tool_name,
                    key_argument(&question.request.args.to_string(), 60)
                ),
            ));
            let _ = reply.send(ApprovalOutcome::AllowedOnce);
            return;
        }
        self.asks.push_back(Asking { question, reply });
        if self.asks.len() == 1 {
            self.show_next_ask();
        }
    }

    /// Plain mode prints the question in front (the terminal mode draws it live).
    pub(super) fn show_next_ask(&mut self) {
        if self.frame.is_some() {
            return;
        }
        if let Some(asking) = self.asks.front() {
            let text = format!("{} [y/n/a]", question_text(&asking.question));
            self.note(Line::new(Tone::Ask, text));
        }
    }

    /// A key while a question is on screen: y (allow once), n or Esc-like keys (deny), a
    /// (allow, and always for this rule in this chat), Ctrl-C (cancel and stop the turn).
    pub(super) async fn answer_key(&mut self, key: Key) {
        let outcome = match key {
            // Not Enter: a message being sent as the question appears must not approve it.
            Key::Char('y' | 'Y') => ApprovalOutcome::AllowedOnce,
            Key::Char('a' | 'A') => {
                if let Some(asking) = self.asks.front() {
                    self.always.insert(rule_of(&asking.question));
                }
                ApprovalOutcome::AllowedOnce
            }
            Key::Char('n' | 'N') => ApprovalOutcome::Rejected,
            Key::Interrupt => {
                self.abort().await;
                self.notice = Some("interrupted · Ctrl-C again to leave".to_owned());
                self.last_ctrl_c = Some(std::time::Instant::now());
                return;
            }
            _ => return,
        };
        if let Some(asking) = self.asks.pop_front() {
            self.record_answer(&asking.question, outcome);
            let _ = asking.reply.send(outcome);
        }
        self.show_next_ask();
    }

    /// The outcome a plain-mode answer line names (anything but y/a denies).
    pub(super) fn answer_text(
        &mut self,
        question: &ApprovalQuestion,
        line: &str,
    ) -> ApprovalOutcome {
        let outcome = match line.trim().chars().next() {
            Some('y' | 'Y') => ApprovalOutcome::AllowedOnce,
            Some('a' | 'A') => {
                self.always.insert(rule_of(question));
                ApprovalOutcome::AllowedOnce
            }
            _ => ApprovalOutcome::Rejected,
        };
        self.record_answer(question, outcome);
        outcome
    }

    fn record_answer(&mut self, question: &ApprovalQuestion, outcome: ApprovalOutcome) {
        let (word, tone) = match outcome {
            ApprovalOutcome::AllowedOnce => ("allowed", Tone::Good),
            _ => ("denied", Tone::Bad),
        };
        let always = if self.always.contains(&rule_of(question)) {
            " (always for this rule)"
        } else {
            ""
        };
        self.note(Line::new(
            tone,
            format!("  {word} {}{always}", question.request.tool_name),
        ));
    }

    /// The model name the status line shows.
    pub(super) fn model_name(&self) -> String {
        match self.deps.model.lock() {
            Ok(m) => match &*m {
                Some((session, model)) if *session == self.session => model.clone(),
                _ => self.model.clone(),
            },
            Err(_) => self.model.clone(),
        }
    }

    /// The live region, top to bottom.
    pub(super) fn live(&self) -> Vec<Line> {
        let mut live: Vec<Line> = self.calls.iter().map(Call::running).collect();
        if !self.stream.is_empty() {
            live.push(Line::new(Tone::Plain, self.stream.clone()));
        }
        if let Some(asking) = self.asks.front() {
            live.push(Line::new(
                Tone::Ask,
                format!(
                    "{}  [y] once · [n] deny · [a] always for this rule",
                    question_text(&asking.question)
                ),
            ));
        }
        if let Some(notice) = &self.notice {
            live.push(Line::new(Tone::Dim, notice.clone()));
        }
        live.push(Line::new(Tone::Status, self.status()));
        let (line, col) = self.editor.cursor();
        for (i, text) in self.editor.lines().iter().enumerate() {
            let lead = if i == 0 { "› " } else { "  " };
            let mut l = Line::new(Tone::Plain, format!("{lead}{text}"));
            if i == line && self.asks.is_empty() {
                l.cursor = Some(col + 2);
            }
            live.push(l);
        }
        live
    }

    fn status(&self) -> String {
        let state = if self.turn.is_some() {
            "working · Enter steers · Ctrl-C stops"
        } else {
            "ready"
        };
        let short: String = self.session.chars().take(12).collect();
        format!(
            "{} · {short} · tokens {}↑ {}↓ · {state}",
            self.model_name(),
            self.tokens.0,
            self.tokens.1
        )
    }
}

/// The rule an "always" answer covers: the tool and the reason the approval row gave.
fn rule_of(q: &ApprovalQuestion) -> (String, String) {
    (
        q.request.tool_name.clone(),
        q.request.reason.clone().unwrap_or_default(),
    )
}

/// `approve write_file notes.txt? (write_file changes the workspace)`.
fn question_text(q: &ApprovalQuestion) -> String {
    let key = key_argument(&q.request.args.to_string(), 60);
    let reason = q
        .request
        .reason
        .as_deref()
        .map(|r| format!(" ({r})"))
        .unwrap_or_default();
    format!("approve {} {key}?{reason}", q.request.tool_name)
}
