//! Read, Write and Edit through the editor's buffers (`fs/read_text_file`,
//! `fs/write_text_file`), when it offers them.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema as acp;

/// The editor's buffers as [`tools::EditorFiles`]: what Read sees is the text the user
/// sees, unsaved changes included, and what Write and Edit write lands in the editor.
/// Each call asks the editor and waits for its answer on the tools' worker thread.
pub struct ClientFiles {
    cx: ConnectionTo<Client>,
    session_id: Arc<OnceLock<String>>,
    runtime: tokio::runtime::Handle,
}

impl std::fmt::Debug for ClientFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientFiles")
            .field("session_id", &self.session_id.get())
            .finish_non_exhaustive()
    }
}

impl ClientFiles {
    /// The files of the session whose id `session_id` will hold, asked of the editor on
    /// `cx`. Must be made inside the Tokio runtime the connection runs on.
    pub(crate) fn new(cx: ConnectionTo<Client>, session_id: Arc<OnceLock<String>>) -> Self {
        Self {
            cx,
            session_id,
            runtime: tokio::runtime::Handle::current(),
        }
    }

    fn session_id(&self) -> Result<String, String> {
        self.session_id
            .get()
            .cloned()
            .ok_or_else(|| "the session is not open yet".to_owned())
    }
}

impl tools::EditorFiles for ClientFiles {
    fn read_text(&self, path: &Path) -> Result<String, String> {
        let request = acp::ReadTextFileRequest::new(self.session_id()?, path.to_path_buf());
        self.runtime
            .block_on(self.cx.send_request(request).block_task())
            .map(|answer| answer.content)
            .map_err(|error| format!("the editor answered: {error}"))
    }

    fn write_text(&self, path: &Path, text: &str) -> Result<(), String> {
        let request =
            acp::WriteTextFileRequest::new(self.session_id()?, path.to_path_buf(), text.to_owned());
        self.runtime
            .block_on(self.cx.send_request(request).block_task())
            .map(|_| ())
            .map_err(|error| format!("the editor answered: {error}"))
    }
}
