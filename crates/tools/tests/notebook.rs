//! Notebooks: Read shows cells and outputs (images as image blocks); NotebookEdit replaces,
//! inserts and deletes cells, writing the notebook back as Jupyter writes it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Env;
use protocol::{ContentBlock, ToolResultContent};
use serde_json::{Value, json};

/// A notebook as Jupyter writes it (`json.dumps(nb, sort_keys=True, indent=1)` and a line
/// break): a markdown cell and a code cell with a text and an image output.
const NOTEBOOK: &str = r##"{
 "cells": [
  {
   "cell_type": "markdown",
   "id": "intro",
   "metadata": {},
   "source": [
    "# Title\n",
    "Some text"
   ]
  },
  {
   "cell_type": "code",
   "execution_count": 1,
   "id": "calc",
   "metadata": {},
   "outputs": [
    {
     "name": "stdout",
     "output_type": "stream",
     "text": [
      "42\n"
     ]
    },
    {
     "data": {
      "image/png": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC",
      "text/plain": [
       "<Figure>"
      ]
     },
     "metadata": {},
     "output_type": "display_data"
    }
   ],
   "source": [
    "print(6 * 7)\n",
    "plot()"
   ]
  }
 ],
 "metadata": {
  "kernelspec": {
   "display_name": "Python 3",
   "language": "python",
   "name": "python3"
  },
  "language_info": {
   "name": "python"
  }
 },
 "nbformat": 4,
 "nbformat_minor": 5
}
"##;

fn setup(name: &str) -> Env {
    let env = Env::new(name);
    std::fs::write(env.ws().join("nb.ipynb"), NOTEBOOK).unwrap();
    env
}

#[tokio::test]
async fn read_shows_cells_outputs_and_images() {
    let env = setup("nb-read");
    let output = env
        .call("Read", json!({"file_path": "nb.ipynb"}))
        .await
        .unwrap();
    let ToolResultContent::Blocks(blocks) = &output.content else {
        panic!("{:?}", output.content);
    };
    let text: String = blocks.iter().filter_map(ContentBlock::as_text).collect();
    assert!(
        text.contains("<cell id=\"intro\" type=\"markdown\"># Title\nSome text</cell>"),
        "{text}"
    );
    assert!(
        text.contains("<cell id=\"calc\" type=\"code\">print(6 * 7)\nplot()</cell>"),
        "{text}"
    );
    assert!(text.contains("<outputs of=\"calc\">42\n<Figure>"), "{text}");
    assert!(
        blocks
            .iter()
            .any(|block| matches!(block, ContentBlock::Image(_)))
    );
    assert_eq!(output.structured.unwrap()["type"], "notebook");
}

#[tokio::test]
async fn notebook_edit_replaces_inserts_and_deletes_cells() {
    let env = setup("nb-edit");
    // Not read yet: refused, unchanged.
    let refused = env
        .err(
            "NotebookEdit",
            json!({"notebook_path": "nb.ipynb", "cell_id": "calc", "new_source": "x = 1"}),
        )
        .await;
    assert!(refused.contains("has not been read"), "{refused}");
    env.call("Read", json!({"file_path": "nb.ipynb"}))
        .await
        .unwrap();
    env.ok(
        "NotebookEdit",
        json!({"notebook_path": "nb.ipynb", "cell_id": "calc", "new_source": "x = 6 * 7\nprint(x)"}),
    )
    .await;
    let written = std::fs::read_to_string(env.ws().join("nb.ipynb")).unwrap();
    // Jupyter's format: the untouched cell and the metadata as they were, byte for byte.
    let intro_end = NOTEBOOK.find("\"id\": \"calc\"").unwrap();
    let calc_at = NOTEBOOK[..intro_end].rfind("  {").unwrap();
    assert_eq!(&written[..calc_at], &NOTEBOOK[..calc_at]);
    let tail = &NOTEBOOK[NOTEBOOK.find(" \"metadata\": {\n  \"kernelspec\"").unwrap()..];
    assert!(written.ends_with(tail), "{written}");
    let notebook: Value = serde_json::from_str(&written).unwrap();
    let calc = &notebook["cells"][1];
    assert_eq!(calc["source"], json!(["x = 6 * 7\n", "print(x)"]));
    assert_eq!(calc["outputs"], json!([]));
    assert_eq!(calc["execution_count"], Value::Null);

    env.ok(
        "NotebookEdit",
        json!({"notebook_path": "nb.ipynb", "cell_id": "intro", "new_source": "## Setup", "cell_type": "markdown", "edit_mode": "insert"}),
    )
    .await;
    env.ok(
        "NotebookEdit",
        json!({"notebook_path": "nb.ipynb", "cell_id": "cell-0", "new_source": "", "edit_mode": "delete"}),
    )
    .await;
    let written = std::fs::read_to_string(env.ws().join("nb.ipynb")).unwrap();
    let notebook: Value = serde_json::from_str(&written).unwrap();
    let cells = notebook["cells"].as_array().unwrap();
    // The new cell's keys in Jupyter's (sorted) order.
    let keys: Vec<&String> = cells[0].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["cell_type", "id", "metadata", "source"], "{written}");
    assert_eq!(cells.len(), 2);
    assert_eq!(cells[0]["source"], json!(["## Setup"]));
    assert_eq!(cells[0]["id"].as_str().unwrap().len(), 8);
    assert_eq!(cells[1]["id"], "calc");
}

#[tokio::test]
async fn a_broken_notebook_or_a_protected_one_is_refused_unchanged() {
    let env = Env::new("nb-broken");
    std::fs::write(env.ws().join("bad.ipynb"), "{ not json").unwrap();
    let error = env.err("Read", json!({"file_path": "bad.ipynb"})).await;
    assert!(error.contains("is not a valid notebook"), "{error}");
    std::fs::create_dir_all(env.ws().join(".claude")).unwrap();
    std::fs::write(env.ws().join(".claude/x.ipynb"), NOTEBOOK).unwrap();
    env.call("Read", json!({"file_path": ".claude/x.ipynb"}))
        .await
        .unwrap();
    let refused = env
        .err(
            "NotebookEdit",
            json!({"notebook_path": ".claude/x.ipynb", "cell_id": "calc", "new_source": "x"}),
        )
        .await;
    assert!(refused.contains("protected"), "{refused}");
    assert_eq!(
        std::fs::read_to_string(env.ws().join(".claude/x.ipynb")).unwrap(),
        NOTEBOOK
    );
}

/// What another tool wrote (big integers, a float as Python spells it, two-space indent,
/// unsorted keys) stays byte for byte outside the cell an edit names; inserts and deletes
/// at either end keep the file valid.
#[tokio::test]
async fn an_edit_keeps_every_other_byte() {
    let env = Env::new("nb-bytes");
    let original = "{\n  \"metadata\": {\"big\": 123456789012345678901234567890, \"max\": 18446744073709551616, \"rate\": 1e-05},\n  \"nbformat\": 4,\n  \"nbformat_minor\": 4,\n  \"cells\": [\n    {\"source\": [\"a = 1\"], \"cell_type\": \"code\", \"metadata\": {\"n\": 1.0E+3}, \"outputs\": [], \"execution_count\": null},\n    {\"cell_type\": \"markdown\", \"metadata\": {}, \"source\": \"notes\"}\n  ]\n}\n";
    std::fs::write(env.ws().join("nb.ipynb"), original).unwrap();
    let edit = |input: Value| {
        let env = &env;
        async move {
            env.call("Read", json!({"file_path": "nb.ipynb"}))
                .await
                .unwrap();
            env.call("NotebookEdit", input).await.unwrap();
            std::fs::read_to_string(env.ws().join("nb.ipynb")).unwrap()
        }
    };
    let written =
        edit(json!({"notebook_path": "nb.ipynb", "cell_id": "cell-1", "new_source": "more notes"}))
            .await;
    // Everything before and after the replaced cell is the original's, byte for byte.
    let cell = "{\"cell_type\": \"markdown\", \"metadata\": {}, \"source\": \"notes\"}";
    let at = original.find(cell).unwrap();
    let (before, after) = (&original[..at], &original[at + cell.len()..]);
    assert!(written.starts_with(before), "{written}");
    assert!(written.ends_with(after), "{written}");
    assert!(
        written.contains("123456789012345678901234567890")
            && written.contains("18446744073709551616")
            && written.contains("1e-05")
            && written.contains("1.0E+3"),
        "{written}"
    );
    let parsed: Value = serde_json::from_str(&written).unwrap();
    assert_eq!(parsed["cells"][1]["source"], json!(["more notes"]));
    assert_eq!(parsed["cells"][0]["source"], json!(["a = 1"]));

    // Delete the last cell, then the only one, then insert into the empty list.
    let written = edit(json!({"notebook_path": "nb.ipynb", "cell_id": "cell-1", "new_source": "", "edit_mode": "delete"})).await;
    assert_eq!(
        serde_json::from_str::<Value>(&written).unwrap()["cells"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let written = edit(json!({"notebook_path": "nb.ipynb", "cell_id": "cell-0", "new_source": "", "edit_mode": "delete"})).await;
    assert_eq!(
        serde_json::from_str::<Value>(&written).unwrap()["cells"],
        json!([])
    );
    let written = edit(json!({"notebook_path": "nb.ipynb", "new_source": "x = 2", "edit_mode": "insert", "cell_type": "code"})).await;
    let parsed: Value = serde_json::from_str(&written).unwrap();
    assert_eq!(parsed["cells"][0]["source"], json!(["x = 2"]));
    assert!(
        written.contains("123456789012345678901234567890"),
        "{written}"
    );
}

/// Hostile notebooks are refused before they cost memory or reach a panic: a cell that is not
/// an object, and a file of a million tiny values.
#[tokio::test]
async fn hostile_notebooks_are_refused() {
    let env = Env::new("nb-hostile");
    std::fs::write(
        env.ws().join("odd.ipynb"),
        r#"{"cells": [{"cell_type": "code", "source": "x", "metadata": {}}, "str", 7], "metadata": {}, "nbformat": 4, "nbformat_minor": 4}"#,
    )
    .unwrap();
    let error = env.err("Read", json!({"file_path": "odd.ipynb"})).await;
    assert!(error.contains("cell 1 is not an object"), "{error}");
    let error = env
        .err(
            "NotebookEdit",
            json!({"notebook_path": "odd.ipynb", "cell_id": "cell-1", "new_source": "y"}),
        )
        .await;
    assert!(
        error.contains("cell 1 is not an object") || error.contains("has not been read"),
        "{error}"
    );
    // Output images are checked as image files are: junk is a line, not an image block.
    std::fs::write(
        env.ws().join("junk.ipynb"),
        json!({"cells": [{"cell_type": "code", "id": "c", "metadata": {}, "source": "plot()", "outputs": [
            {"output_type": "display_data", "metadata": {}, "data": {"image/png": "not base64 <>!!"}},
            {"output_type": "display_data", "metadata": {}, "data": {"image/jpeg": "R0lGODlhAQABAAAAACw="}},
        ]}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
        .to_string(),
    )
    .unwrap();
    let output = env
        .call("Read", json!({"file_path": "junk.ipynb"}))
        .await
        .unwrap();
    let text = output.content.text();
    assert!(
        text.contains("[image not shown: an output of c: not base64"),
        "{text}"
    );
    assert!(text.contains("[image not shown: an output of c:"), "{text}");
    assert!(
        !matches!(&output.content, ToolResultContent::Blocks(blocks) if blocks.iter().any(|b| matches!(b, ContentBlock::Image(_)))),
        "{text}"
    );
    let zeros = format!("{{\"cells\": [{}0]}}", "0,".repeat(1_100_000));
    std::fs::write(env.ws().join("zeros.ipynb"), zeros).unwrap();
    let error = env.err("Read", json!({"file_path": "zeros.ipynb"})).await;
    assert!(error.contains("more than 1000000 JSON values"), "{error}");
}

/// A notebook written on one line (not Jupyter's layout) stays valid JSON through every edit,
/// its new cells compact like the rest.
#[tokio::test]
async fn a_one_line_notebook_stays_valid() {
    let env = Env::new("nb-compact");
    let original = r#"{"cells":[{"cell_type":"code","source":"a","metadata":{},"outputs":[],"execution_count":null},{"cell_type":"markdown","source":"b","metadata":{}}],"metadata":{},"nbformat":4,"nbformat_minor":4}"#;
    std::fs::write(env.ws().join("one.ipynb"), original).unwrap();
    for input in [
        json!({"notebook_path": "one.ipynb", "cell_id": "cell-0", "new_source": "a = 1"}),
        json!({"notebook_path": "one.ipynb", "cell_id": "cell-1", "new_source": "c", "edit_mode": "insert", "cell_type": "markdown"}),
        json!({"notebook_path": "one.ipynb", "cell_id": "cell-1", "new_source": "", "edit_mode": "delete"}),
    ] {
        env.call("Read", json!({"file_path": "one.ipynb"}))
            .await
            .unwrap();
        env.call("NotebookEdit", input).await.unwrap();
        let written = std::fs::read_to_string(env.ws().join("one.ipynb")).unwrap();
        assert!(!written.contains('\n'), "{written}");
        serde_json::from_str::<Value>(&written)
            .unwrap_or_else(|error| panic!("{error}: {written}"));
    }
    let parsed: Value =
        serde_json::from_str(&std::fs::read_to_string(env.ws().join("one.ipynb")).unwrap())
            .unwrap();
    let sources: Vec<Value> = parsed["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cell| cell["source"].clone())
        .collect();
    // "c" went in after "b", then "b" went.
    assert_eq!(sources, [json!(["a = 1"]), json!(["c"])]);
}
