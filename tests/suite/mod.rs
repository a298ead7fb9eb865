//! Suites, one per behaviour.

/// `keel acp`: cancel, one prompt per session, bad frames in raw bytes (issue 26 item 3).
mod acp_control;
/// `keel acp` driven by the official TypeScript ACP client: prompts, permissions, load
/// (issue 26 item 3, SURF-03).
mod acp_session;
/// Helpers for the acp suites.
mod acp_support;
/// Model faults through the binary: named terminal states, retries, exit codes (B14, §11).
mod agent_faults;
/// Ids in a session: message ids across resumes, tool-call ids repeating across steps
/// (issue 11 items 6 and 10).
mod agent_ids;
/// The agent against llama.cpp's server quirks: tool_choice, the non-streamed fallback, the
/// real overflow error, unknown usage (issue 11 items 1–5).
mod agent_llama_cpp;
/// `keel resume` runs a session under the profile it was created with (issue 11 item 7).
mod agent_profile;
/// The agent survives crashes and failing plugins (SES-06, LOOP-08/09/12).
mod agent_recovery;
/// The agent end to end against the loopback model server (issue 4 acceptance).
mod agent_run;
/// Helpers for the agent suites.
mod agent_support;
/// The Anthropic adapter's faults: overloaded, 529, cut streams, missing key (issue 15 item 2).
mod anthropic_faults;
/// The Anthropic adapter end to end: tool use, wire shape, thinking blocks (issue 15 item 2).
mod anthropic_run;
/// Helpers for the Anthropic suites (issue 15 item 2).
mod anthropic_support;
/// Where start-up goes, on one clock from exec (issue 25 item 1).
mod boot_timing;
/// Listener errors, panics, faults, deadlines and ABI misuse (EVT-01/05/10, Cordis cases 4–13).
mod bus_faults;
/// The five dispatch modes, through real cdylibs (EVT-01/02/05, Cordis cases A–B).
mod bus_modes;
/// Who declares an event: the kernel only `kernel/*`, owners the rest (issue 13 item 2).
mod bus_owners;
/// Child environments: an allow-list, never a held credential, for shell, hooks and MCP
/// servers (issue 23 item 1).
mod child_env;
/// Bad input to the binary: one line, exit 2, naming the culprit.
mod claude_files;
mod cli_commands;
mod cli_errors;
/// `--patch NAME` through the config search path from any directory (issue 23 item 15).
mod cli_patches;
/// Profiles, layers, provenance, `config dump`, `plugins list`, `doctor`.
mod cli_reports;
/// `keel resume` applies the run's recorded `-c` and `--patch` layers (issue 23 item 3).
mod cli_resume_layers;
/// A bad `context` row config is refused before any request, naming the key or file (issue 14).
mod context_config;
/// Issue 14's long session: 300 steps of 8 KB under a 16k window (CTX-01/03/04/05, MEM-08).
mod context_long;
/// Issue 14's other context paths: summarise, refuse, server-side overflow, the result cap,
/// the cold tier's tools (CTX-01…06).
mod context_paths;
/// Helpers for the context suites (issue 14).
mod context_support;
/// Compaction survives resume, fork, SIGKILL and replay (issue 14 item 6).
mod context_survives;
/// A vetoed compaction plan appends nothing; what no longer fits ends CONTEXT_OVERFLOW (issue 14).
mod context_veto;
/// `keel doctor` asks the rows that serve checks; the kernel knows no sandbox (issue 13 item 2).
mod doctor_seam;
/// Sandbox escalation through an approver plugin (SBX-08).
mod escalation;
/// The session is durable when keel dies right after its first model request (SES-05, issue
/// 25 item 3).
mod first_request_durable;
/// Hard links to keel's files refused by identity; no lock file left (issue 23 item 8).
mod fs_links;
/// Claude Code's own settings file under keel: aliases, stdin fields, formatters (issue 23
/// items 10-12).
mod hooks_claude;
/// Helpers for the hooks suites (issue 15 item 3).
mod hooks_compact;
mod hooks_mcp;
mod hooks_support;
/// PreToolUse / PostToolUse hooks: block, rewrite, timeouts, MCP-named tools (issue 15 item 3).
mod hooks_tools;
/// `.claude/settings*.json` only under project trust; bad hook input is exit 2 (issue 15 item 3).
mod hooks_trust;
/// UserPromptSubmit, SessionStart, Stop hooks, headless, the scrubbed audit (issue 15 item 3).
mod hooks_turns;
/// Idle rows and the manifest cache: checked, not opened until they have work (issue 25 item 3).
mod idle_rows;
/// keel's own files and process against a hostile model (issue 10 items 1-4).
mod keel_files;
/// The Landlock runner of the sandbox chain (SBX-04/06/07/09).
mod landlock;
/// Fibers, effects, inject, reload (PLG-02..06, KRN-03, Cordis cases C–D).
mod lifecycle;
/// Lifecycle changes never overlap: one status grammar, no disposer beside `activate`, an
/// overtaken control says so (issue 13 item 1).
mod lifecycle_overlap;
/// `keel.lock` beside the binary (KRN-04, KRN-05).
mod lock;
/// The digest cache: a warm start reads no library, a changed one is still refused (issue 25).
mod lock_cache;
/// `keel.lock` covers every library on the search path, whichever profile loads it (issue 10).
mod lock_search_path;
/// Bad MCP servers refused before any request; `keel mcp list` (issue 15).
mod mcp_config;
/// MCP failures that name their cause: exit code and stderr, offline npx, replies over
/// 16 MiB (issue 23 items 8 and 17).
mod mcp_failures;
/// MCP calls through the B9 pipeline: approval, firewall, deadlines, crashes, list changes
/// (issue 15).
mod mcp_pipeline;
/// server-everything over stdio and streamable HTTP (issue 15).
mod mcp_servers;
/// Helpers for the mcp suites.
mod mcp_support;
/// `cargo xtask new-plugin`: a generated plugin built out of tree and run end to end (issue 12).
mod new_plugin;
/// A plugin built out of tree, and an ABI-major mismatch fixture.
mod out_of_tree;
/// Project-file trust is declared by plugins: a row gets no answer for a file its plugin did
/// not declare (issue 24 item 4).
mod project_file_trust;
/// The prompt and the limits are guarded keys (issue 23 item 6).
mod project_guarded;
/// Files a run changed in `.keel/`, `.claude/` or a workspace patch are tainted (issue 23
/// item 6).
mod project_taint;
/// Trust before the lock: a planted project layer on a locked build (issue 23 item 5).
mod project_trust_lock;
/// Helpers for the suites that run `proof-driver` scripts.
mod proof;
/// Resident children: queues, two-level memory, no residue, child→parent (issue 16 item 2).
mod resident;
/// Resident children after a SIGKILL: `keel resume` recovers them, dead temp stores go.
mod resident_crash;
/// Resident children's residual states keep/drop/park/return (SUB-02).
mod resident_stop;
/// Helpers for the resident suites.
mod resident_support;
/// Which runner of the sandbox chain confines: bubblewrap before a partial Landlock (issue 10).
mod sandbox_chain;
/// The user's private files are masked for every confined process: shell, hooks, MCP
/// servers, under bubblewrap and Landlock (issue 23 items 4 and 8).
mod sandbox_private;
/// Confined trees never outlive keel or their call, and no mount point is left in the
/// workspace (issue 23 items 7, 8 and 18).
mod sandbox_supervise;
mod scheduler;
/// Secrets in flight: resolved credentials scrubbed, keel's environment emptied of them,
/// base64 at every alignment, hostile values through bash (issue 10, SEC-01/02/03/09).
mod secrets_in_flight;
/// Placeholder keys are sent but never scrubbed, `SECRET_WEAK`, no key at all (issue 23 item 2).
mod secrets_weak;
/// Sandbox escapes, the secret canary, firewall facts on the real chain (SBX, SEC).
mod security;
/// Sessions through the binary: `keel sessions list|show`, `keel fork` (C6, B7, B8).
mod sessions;
/// Bad session input: torn tails, corruption, foreign formats, read-only and full disks (SES-09/10).
mod sessions_bad_input;
/// SIGKILL a writing `keel run` many times and reload its session (issue 3 acceptance).
mod sessions_crash;
/// Session refusals and repairs say what they are: foreign SQLite on run, torn tails cut,
/// unreadable files, a lost resume race (issue 10 items 11–13).
mod sessions_reports;
/// Helpers shared by the session suites (writer profile, log checks, B7 closers, projection).
mod sessions_support;
/// What `cargo xtask dist` ships runs the shipped patch under the shipped lock, and searches
/// only its own tree (issue 23 items 8 and 9).
mod ship_dist;
/// `cargo xtask install`: a locked `keel` on PATH that runs from any directory, README's real
/// model path as written (issue 23 item 14).
mod ship_install;
/// Helpers for the shipping suites: a real dist tree or install prefix from the debug build.
mod ship_support;
/// SIGINT, SIGTERM, SIGHUP during a running tool: its tree stops, the session closes (§11).
mod signals;
/// Small local models: usage in streams, unknown usage, children's step budgets (issue 23 item 19).
mod small_models;
/// One stderr line per failure, whatever the quoted text holds (issue 11 item 9, §11).
mod stderr_lines;
/// keel's stream-json through the real Claude Agent SDK parser (issue 23 item 13).
mod stream_claude;
/// stream-json prints an event only once it is durable (issue 10 item 6, SES-04).
mod stream_durable;
/// `keel run --input-format stream-json`: messages, steers and interrupts on stdin (issue 16
/// item 4).
mod stream_input;
/// The stdin-driven conversation helper (issue 16 item 4).
mod stream_input_support;
/// Token streaming: `--include-partial-messages` while the model server holds its stream
/// (issue 26 item 1).
mod stream_partial;
/// The live stdout reader of the streaming suites (issue 26 item 1).
mod stream_partial_support;
/// A message and an interrupt in one write, bad and huge stdin lines (issue 23 item 7).
mod stream_race;
/// Workspace structure rules (the kernel depends on no plugin).
mod structure;
/// Children that fail, time out, step outside their tool set or meet approval (issue 16).
mod subagent_faults;
/// The secret firewall inside a child (issue 16 item 1).
mod subagent_guards;
/// The `agent` tool: parallel children, fork, caps (issue 16 item 1; SES-13, SUB-05).
mod subagent_run;
/// Signals and SIGKILL with children running; resume recovers the tree (SUB-07, SES-06).
mod subagent_signals;
/// Child agents in stream-json: every child's events with its lineage (issue 16 item 1).
mod subagent_stream;
/// Helpers for the subagent suites (issue 16).
mod subagent_support;
/// Long tools do not hold the loop; confined ones run a layer apart (SBX-10, SBX-11).
mod tool_isolation;
/// `keel chat` in a pseudo-terminal: approvals, Ctrl-C, resume, resize, plain text (issue 26
/// item 2).
mod tui_chat;
/// The pseudo-terminal helper for the chat suites (issue 26 item 2).
mod tui_support;
