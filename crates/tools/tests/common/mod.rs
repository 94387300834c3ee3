//! Shared harness of the integration tests: a real temporary directory holding a workspace
//! (`<root>/ws`) with room around it (`<root>`) to check that nothing escapes, and helpers to
//! call the tools directly or through the executor with the set's permission gate.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use executor::{
    CompletedTool, ExecutorConfig, ExecutorEvent, StreamingToolExecutor, ToolCall, ToolContext,
    ToolError, ToolOutput, Workspace,
};
use protocol::ToolResultContent;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tools::{PermissionConfig, PermissionMode, ToolSet, ToolSetConfig, Verdict};

/// A fresh directory under the system temp directory, removed on drop.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub fn new(name: &str) -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "agent-tools-it-{name}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        // Resolve `/tmp` links once, so expected paths compare equal to the tools' output.
        let path = std::fs::canonicalize(&path).unwrap();
        Self { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A sandbox declared available without being checked: for verdict tests, which never start
/// it.
pub fn declared_sandbox() -> tools::SandboxConfig {
    tools::SandboxConfig {
        backend: Some(tools::sandbox::Backend::Bubblewrap("/usr/bin/bwrap".into())),
        network: false,
        user_commands: false,
        helper: None,
    }
}

/// The sandbox that works here, for tests that run commands in it; `None` (with a note)
/// when there is none, and a failure in CI (`CI=true`), which installs bubblewrap.
pub fn real_sandbox() -> Option<tools::SandboxConfig> {
    let backend = tools::sandbox::Backend::detect(None);
    if backend.is_available() {
        return Some(tools::SandboxConfig {
            backend: Some(backend),
            network: false,
            user_commands: false,
            helper: None,
        });
    }
    assert!(
        !std::env::var("CI").is_ok_and(|ci| ci == "true"),
        "CI needs a working sandbox (bubblewrap): {backend}"
    );
    eprintln!("NOTE: sandboxed-run tests skipped: {backend}");
    None
}

/// A workspace `<root>/ws` and the tools of one session over it.
pub struct Env {
    pub root: TempDir,
    pub workspace: Arc<Workspace>,
    pub set: ToolSet,
}

impl Env {
    pub fn new(name: &str) -> Self {
        Self::with_permissions(name, PermissionConfig::default())
    }

    pub fn with_mode(name: &str, mode: PermissionMode) -> Self {
        Self::with_permissions(
            name,
            PermissionConfig {
                default_mode: mode,
                ..PermissionConfig::default()
            },
        )
    }

    pub fn with_permissions(name: &str, permissions: PermissionConfig) -> Self {
        Self::build(name, |config| config.permissions = permissions)
    }

    pub fn build(name: &str, configure: impl FnOnce(&mut ToolSetConfig)) -> Self {
        let root = TempDir::new(name);
        let ws = root.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let workspace = Arc::new(Workspace {
            cwd: ws,
            additional_dirs: Vec::new(),
        });
        // The process mechanics are tested unsandboxed; tests/sandbox.rs turns it on.
        let mut config = ToolSetConfig {
            workspace: Arc::clone(&workspace),
            sandbox: tools::SandboxConfig {
                backend: None,
                network: false,
                user_commands: false,
                helper: None,
            },
            ..ToolSetConfig::default()
        };
        configure(&mut config);
        let workspace = Arc::clone(&config.workspace);
        let set = ToolSet::new(config).unwrap();
        Self {
            root,
            workspace,
            set,
        }
    }

    /// The workspace directory.
    pub fn ws(&self) -> &Path {
        &self.workspace.cwd
    }

    /// Writes `content` to `relative` inside the workspace (creating directories).
    pub fn file(&self, relative: &str, content: &str) -> PathBuf {
        let path = self.ws().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        path
    }

    pub fn read(&self, relative: &str) -> String {
        std::fs::read_to_string(self.ws().join(relative)).unwrap()
    }

    pub fn context(&self) -> ToolContext {
        ToolContext::detached("toolu_test".into(), Arc::clone(&self.workspace))
    }

    /// Calls a tool directly, without the gate.
    pub async fn call(&self, tool: &str, input: Value) -> Result<ToolOutput, ToolError> {
        self.call_with(tool, input, self.context()).await
    }

    pub async fn call_with(
        &self,
        tool: &str,
        input: Value,
        context: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let tool = self.set.tool(tool).unwrap();
        tool.call(input, context).await
    }

    /// Calls a tool directly and returns its text, failing the test on an error.
    pub async fn ok(&self, tool: &str, input: Value) -> String {
        match self.call(tool, input.clone()).await {
            Ok(output) => text(&output).to_owned(),
            Err(error) => panic!("{tool} {input} failed: {error}"),
        }
    }

    /// Calls a tool directly and returns its error message, failing the test on success.
    pub async fn err(&self, tool: &str, input: Value) -> String {
        match self.call(tool, input.clone()).await {
            Ok(output) => panic!("{tool} {input} should fail, gave {output:?}"),
            Err(error) => error.to_string(),
        }
    }

    pub fn verdict(&self, tool: &str, input: &Value) -> Verdict {
        let tool = self.set.tool(tool).unwrap();
        self.set.gate().evaluate(tool.as_ref(), input)
    }

    /// Runs calls through the executor with the set's gate, as a session does; returns the
    /// completed calls in order and every event.
    pub async fn run(&self, calls: Vec<(&str, Value)>) -> (Vec<CompletedTool>, Vec<ExecutorEvent>) {
        let mut executor = StreamingToolExecutor::new(
            self.set.tools(),
            self.set.gate(),
            ExecutorConfig::default(),
            CancellationToken::new(),
            Arc::clone(&self.workspace),
        );
        for (index, (name, input)) in calls.into_iter().enumerate() {
            executor.add_tool(ToolCall::new(
                format!("toolu_{index}").as_str(),
                name,
                input,
            ));
        }
        let events = executor.drain().await;
        let completed = events
            .iter()
            .filter_map(|event| match event {
                ExecutorEvent::Completed(done) => Some(done.as_ref().clone()),
                _ => None,
            })
            .collect();
        (completed, events)
    }
}

pub fn text(output: &ToolOutput) -> &str {
    match &output.content {
        ToolResultContent::Text(text) => text,
        other => panic!("expected text, got {other:?}"),
    }
}

pub fn result_text(done: &CompletedTool) -> &str {
    match &done.result.content {
        ToolResultContent::Text(text) => text,
        other => panic!("expected text, got {other:?}"),
    }
}
