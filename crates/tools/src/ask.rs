//! `AskUserQuestion {questions}`: the model asks the user one to four multiple-choice
//! questions, as Claude Code's models are trained to.
//!
//! As in Claude Code, the question is the permission gate's: the gate always asks about this
//! tool (no rule or mode skips it; a deny rule refuses it), and the prompter shows the
//! questions and writes the user's answers into the input's `answers` field (question text to
//! the chosen label, several labels joined with ", ", or the user's own words) before the
//! call runs. Headless, with no prompter, the call is refused with a result that tells the
//! model to go on with its own judgment. The tool itself only reports the answers.

use executor::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ValidateFuture};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::common::parse_input;

/// The tool's name, as Claude Code spells it.
pub const ASK_USER_QUESTION: &str = "AskUserQuestion";

/// What a headless session answers (the executor puts the denial's words before it).
pub const HEADLESS_ANSWER: &str = "this session cannot ask the user (it runs headless). Do not wait for an answer: go on with your own best judgment, choose the option that is safest and easiest to change later, and say in your final answer which choice you made and why";

/// One question, as the model writes it.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Question {
    /// The question, ending with a question mark.
    pub question: String,
    /// A short label for it (at most 12 characters).
    pub header: String,
    /// Two to four choices.
    pub options: Vec<QuestionOption>,
    /// Whether several options may be chosen.
    #[serde(default)]
    pub multi_select: bool,
}

/// One choice of a [`Question`].
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct QuestionOption {
    /// What the user picks (1 to 5 words).
    pub label: String,
    /// What choosing it means.
    #[serde(default)]
    pub description: String,
    /// Content shown while the option is focused (a mockup, a snippet).
    #[serde(default)]
    pub preview: Option<String>,
}

#[derive(Deserialize)]
struct Input {
    questions: Vec<Question>,
    #[serde(default)]
    answers: Option<serde_json::Map<String, Value>>,
}

impl Question {
    /// The questions of an AskUserQuestion call's `input`, for a prompter to show.
    ///
    /// # Errors
    ///
    /// A message naming what is wrong with the input.
    pub fn parse_all(input: &Value) -> Result<Vec<Self>, String> {
        let input: Input = serde_json::from_value(input.clone())
            .map_err(|error| format!("the questions do not parse: {error}"))?;
        check(&input.questions)?;
        Ok(input.questions)
    }
}

/// The rules Claude Code's schema states: 1 to 4 questions, each with 2 to 4 options, and
/// question texts that differ (they key the answers).
fn check(questions: &[Question]) -> Result<(), String> {
    if questions.is_empty() || questions.len() > 4 {
        return Err(format!(
            "{} questions; ask 1 to 4 at a time",
            questions.len()
        ));
    }
    for (index, question) in questions.iter().enumerate() {
        if !(2..=4).contains(&question.options.len()) {
            return Err(format!(
                "question {} has {} options; give 2 to 4 (an \"Other\" choice is added for the user)",
                index + 1,
                question.options.len()
            ));
        }
        if questions[..index]
            .iter()
            .any(|earlier| earlier.question == question.question)
        {
            return Err(format!(
                "question {} repeats an earlier question's text",
                index + 1
            ));
        }
    }
    Ok(())
}

/// See the module docs.
pub(crate) struct AskUserQuestionTool {
    schema: Value,
    /// Left out of requests (with nobody to ask, as headless): a model that calls it anyway
    /// is told to go on with its own judgment.
    hidden: bool,
}

impl AskUserQuestionTool {
    pub(crate) fn new(hidden: bool) -> Self {
        let option = json!({
            "type": "object",
            "properties": {
                "label": {"type": "string"},
                "description": {"type": "string"},
                "preview": {"type": "string"}
            },
            "required": ["label", "description"]
        });
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "questions": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 4,
                    "items": {
                        "type": "object",
                        "properties": {
                            "question": {"type": "string"},
                            "header": {"type": "string", "description": "At most 12 characters"},
                            "options": {"type": "array", "minItems": 2, "maxItems": 4, "items": option},
                            "multiSelect": {"type": "boolean"}
                        },
                        "required": ["question", "header", "options", "multiSelect"]
                    }
                }
            },
            "required": ["questions"]
        });
        Self { schema, hidden }
    }
}

impl Tool for AskUserQuestionTool {
    fn name(&self) -> &str {
        ASK_USER_QUESTION
    }

    fn hidden(&self) -> bool {
        self.hidden
    }

    fn description(&self) -> &str {
        "Asks the user 1 to 4 multiple-choice questions and returns the answers. Use it when a \
         decision is theirs (an approach, an ambiguous requirement) and a wrong guess would \
         waste work. Each question: 2 to 4 options, each a short label and its trade-off; the \
         user may answer in their own words. Put the option you recommend first."
    }

    fn input_schema(&self) -> &Value {
        &self.schema
    }

    fn is_read_only(&self, _input: &Value) -> bool {
        true
    }

    fn validate<'a>(&'a self, input: &'a Value, _context: &'a ToolContext) -> ValidateFuture<'a> {
        let checked = Question::parse_all(input)
            .map(|_| ())
            .map_err(ToolError::InvalidInput);
        Box::pin(std::future::ready(checked))
    }

    fn call(&self, input: Value, _context: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move {
            let input: Input = parse_input(ASK_USER_QUESTION, input)?;
            check(&input.questions).map_err(ToolError::InvalidInput)?;
            let Some(answers) = input.answers.filter(|answers| !answers.is_empty()) else {
                return Err(ToolError::InvalidInput(
                    "the user gave no answer; go on with your own best judgment and say which choice you made".into(),
                ));
            };
            let mut text = String::from("The user answered your questions:");
            for question in &input.questions {
                let answer = answers
                    .get(&question.question)
                    .and_then(Value::as_str)
                    .unwrap_or("(no answer)");
                text.push_str(&format!("\n- \"{}\": {answer}", question.question));
            }
            text.push_str("\nGo on with these answers in mind.");
            let questions: Vec<Value> = input
                .questions
                .iter()
                .map(|question| {
                    json!({
                        "question": question.question,
                        "header": question.header,
                        "options": question.options.iter().map(|option| {
                            let mut shown = json!({"label": option.label, "description": option.description});
                            if let Some(preview) = &option.preview {
                                shown["preview"] = json!(preview);
                            }
                            shown
                        }).collect::<Vec<_>>(),
                        "multiSelect": question.multi_select,
                    })
                })
                .collect();
            Ok(ToolOutput::text(text).with_structured(json!({
                "questions": questions,
                "answers": answers,
            })))
        })
    }
}
