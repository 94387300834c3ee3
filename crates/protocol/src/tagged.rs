//! Serde plumbing for the `type`-tagged unions of the API that must keep unknown variants.
//!
//! serde's internally tagged enums cannot carry an unknown variant with its data, so the unions
//! here deserialize through a [`JsonObject`], dispatch on `type`, and serialize by writing `type`
//! first and then the variant's fields. Only block starts and message-level objects go through
//! this path; the per-delta hot path in `sse-parser` does not.

use serde::de::DeserializeOwned;
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::JsonObject;

/// Serializes `inner` as an object whose first key is `"type": ty`.
pub(crate) fn serialize_tagged<S: Serializer, T: Serialize>(
    ty: &str,
    inner: &T,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Tagged<'a, T> {
        #[serde(rename = "type")]
        ty: &'a str,
        #[serde(flatten)]
        inner: &'a T,
    }
    Tagged { ty, inner }.serialize(serializer)
}

/// Reads the string `type` of an object, or says what is wrong with it.
pub(crate) fn type_of<E: serde::de::Error>(map: &JsonObject, what: &str) -> Result<String, E> {
    match map.get("type") {
        Some(Value::String(ty)) => Ok(ty.clone()),
        Some(other) => Err(E::custom(format_args!(
            "{what}: `type` must be a string, found {other}"
        ))),
        None => Err(E::custom(format_args!("{what}: missing `type` field"))),
    }
}

/// Deserializes the variant struct `T` from `map` without its `type` key.
pub(crate) fn from_object<T: DeserializeOwned, E: serde::de::Error>(
    mut map: JsonObject,
    ty: &str,
) -> Result<T, E> {
    map.shift_remove("type");
    serde_json::from_value(Value::Object(map))
        .map_err(|error| E::custom(format_args!("`{ty}` block: {error}")))
}

/// Keeps `Option` fields out of the output when they are `None` (the API omits nulls too).
pub(crate) fn skip_none<T>(value: &Option<T>) -> bool {
    value.is_none()
}
