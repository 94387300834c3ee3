//! An editor's prompt as the next user message.

use agent_client_protocol::v1::schema as acp;
use protocol::{ContentBlock, MessageParam};
use serde_json::json;

/// The user message for `prompt`: text as it is; an image as an image block; a link to a
/// resource as `[@name](uri)`, for the model to read; an embedded resource's text in a
/// `<context ref="uri">` block (an embedded image as an image).
///
/// # Errors
///
/// A block this agent did not offer to take (audio, a binary resource that is not an
/// image), or an empty prompt, named with its position.
pub(crate) fn message(prompt: Vec<acp::ContentBlock>) -> Result<MessageParam, String> {
    let mut content = Vec::new();
    for (number, block) in prompt.into_iter().enumerate() {
        let at = number + 1;
        match block {
            acp::ContentBlock::Text(text) => content.push(ContentBlock::text(text.text)),
            acp::ContentBlock::Image(image) => {
                content.push(image_block(&image.mime_type, &image.data))
            }
            acp::ContentBlock::ResourceLink(link) => {
                content.push(ContentBlock::text(format!(
                    "[@{}]({})",
                    link.name, link.uri
                )));
            }
            acp::ContentBlock::Resource(embedded) => match embedded.resource {
                acp::EmbeddedResourceResource::TextResourceContents(text) => {
                    content.push(ContentBlock::text(format!(
                        "<context ref=\"{}\">\n{}\n</context>",
                        text.uri, text.text
                    )));
                }
                acp::EmbeddedResourceResource::BlobResourceContents(blob) => {
                    match blob.mime_type.as_deref() {
                        Some(mime) if mime.starts_with("image/") => {
                            content.push(image_block(mime, &blob.blob));
                        }
                        other => {
                            return Err(format!(
                                "prompt block {at}: a binary resource ({}) is not taken; embed text or an image",
                                other.unwrap_or("no MIME type")
                            ));
                        }
                    }
                }
                _ => return Err(format!("prompt block {at}: a resource of an unknown kind")),
            },
            acp::ContentBlock::Audio(_) => {
                return Err(format!(
                    "prompt block {at}: audio is not taken (the agent offers text, images and resources)"
                ));
            }
            _ => {
                return Err(format!(
                    "prompt block {at}: a content block of an unknown type"
                ));
            }
        }
    }
    if content.is_empty() {
        return Err("the prompt is empty".into());
    }
    Ok(MessageParam {
        role: protocol::Role::User,
        content,
    })
}

/// An image block of base64 `data`.
fn image_block(mime: &str, data: &str) -> ContentBlock {
    ContentBlock::Image(protocol::ImageBlock {
        source: json!({"type": "base64", "media_type": mime, "data": data}),
        cache_control: None,
        extra: Default::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_become_context_the_model_can_read() {
        let prompt = vec![
            acp::ContentBlock::Text(acp::TextContent::new("explain")),
            acp::ContentBlock::ResourceLink(acp::ResourceLink::new("lib.rs", "file:///w/lib.rs")),
            acp::ContentBlock::Resource(acp::EmbeddedResource::new(
                acp::EmbeddedResourceResource::TextResourceContents(
                    acp::TextResourceContents::new("fn main() {}", "file:///w/main.rs"),
                ),
            )),
            acp::ContentBlock::Image(acp::ImageContent::new("aGk=", "image/png")),
        ];
        let message = message(prompt).expect("all taken");
        let texts: Vec<_> = message
            .content
            .iter()
            .filter_map(ContentBlock::as_text)
            .collect();
        assert_eq!(texts[0], "explain");
        assert_eq!(texts[1], "[@lib.rs](file:///w/lib.rs)");
        assert_eq!(
            texts[2],
            "<context ref=\"file:///w/main.rs\">\nfn main() {}\n</context>"
        );
        let ContentBlock::Image(image) = &message.content[3] else {
            panic!("not an image: {:?}", message.content[3]);
        };
        assert_eq!(image.source["media_type"], "image/png");
        assert_eq!(image.source["data"], "aGk=");
    }

    #[test]
    fn audio_and_empty_prompts_are_refused_by_position() {
        let audio = vec![
            acp::ContentBlock::Text(acp::TextContent::new("listen")),
            acp::ContentBlock::Audio(acp::AudioContent::new("AAAA", "audio/wav")),
        ];
        assert!(
            message(audio)
                .unwrap_err()
                .starts_with("prompt block 2: audio")
        );
        assert_eq!(message(Vec::new()).unwrap_err(), "the prompt is empty");
    }
}
