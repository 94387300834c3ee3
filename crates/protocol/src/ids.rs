//! Newtypes for the ids the API hands out, so a tool_use id is never mixed up with a message id.

use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! id_newtype {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub String);

        impl $name {
            /// The id as sent by the API.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(id: &str) -> Self {
                Self(id.to_owned())
            }
        }

        impl From<String> for $name {
            fn from(id: String) -> Self {
                Self(id)
            }
        }
    };
}

id_newtype!(
    /// The id of a model response, such as `msg_019Q1hrJbZG26Fb9BQhrkHEr`.
    MessageId
);
id_newtype!(
    /// The id of a tool_use block (`toolu_…`, `srvtoolu_…`, `mcptoolu_…`); its tool_result names
    /// it in `tool_use_id`.
    ToolUseId
);
