//! `agent batch --report results.jsonl`: the sweep at a glance, as a table for the
//! terminal and a self-contained HTML page (the same table, a cost and a duration
//! histogram) beside the results.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::{BatchError, ResultsFile, Status, TaskResult};

/// Reads `results` (a `results.jsonl`), returns the table and writes `report.html` beside
/// it; its path with the table.
///
/// # Errors
///
/// The results cannot be read ([`ResultsFile::read`]) or the page cannot be written.
pub fn report(results: &Path) -> Result<(String, PathBuf), BatchError> {
    let folder = results.parent().unwrap_or(Path::new("."));
    let tasks = ResultsFile::at(results).read()?;
    let page = folder.join("report.html");
    std::fs::write(&page, html(&tasks)).map_err(|error| BatchError::io(&page, error))?;
    Ok((table(&tasks), page))
}

/// The table: one row per task (status, cost, turns, time, first line of the result), then
/// the totals.
pub fn table(tasks: &[TaskResult]) -> String {
    let mut text = format!(
        "{:<24} {:<8} {:>9} {:>6} {:>9}  {}\n",
        "TASK", "STATUS", "COST", "TURNS", "TIME", "RESULT"
    );
    for task in tasks {
        let first: String = task
            .result
            .lines()
            .next()
            .unwrap_or_default()
            .chars()
            .take(60)
            .collect();
        let _ = writeln!(
            text,
            "{:<24} {:<8} {:>9} {:>6} {:>8.1}s  {}",
            render::printable(&task.id, false),
            task.status.as_str(),
            cost(task.total_cost_usd),
            task.num_turns,
            task.duration_ms as f64 / 1000.0,
            render::printable(&first, false)
        );
    }
    let _ = writeln!(text, "{}", Totals::of(tasks).sentence(tasks.len()));
    text
}

/// The page: the table and two histograms (cost, duration), styles inline, no scripts.
fn html(tasks: &[TaskResult]) -> String {
    let mut page = String::from(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>agent batch report</title><style>body{font:14px system-ui,sans-serif;margin:2em}table{border-collapse:collapse}td,th{padding:2px 10px;border-bottom:1px solid #ddd;text-align:left}.done{color:#1a7f37}.failed{color:#cf222e}.stopped{color:#9a6700}.num{text-align:right}</style></head><body><h1>agent batch report</h1>",
    );
    let _ = write!(page, "<p>{}.</p>", Totals::of(tasks).sentence(tasks.len()));
    page.push_str(&histogram(
        "Cost per task (dollars)",
        &tasks
            .iter()
            .filter_map(|task| task.total_cost_usd)
            .collect::<Vec<_>>(),
    ));
    page.push_str(&histogram(
        "Duration per task (seconds)",
        &tasks
            .iter()
            .map(|task| task.duration_ms as f64 / 1000.0)
            .collect::<Vec<_>>(),
    ));
    page.push_str("<table><tr><th>task</th><th>status</th><th class=\"num\">cost</th><th class=\"num\">turns</th><th class=\"num\">time</th><th>result</th></tr>");
    for task in tasks {
        let first = task.result.lines().next().unwrap_or_default();
        let _ = write!(
            page,
            "<tr><td>{}</td><td class=\"{s}\">{s}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{:.1} s</td><td>{}</td></tr>",
            escape(&task.id),
            cost(task.total_cost_usd),
            task.num_turns,
            task.duration_ms as f64 / 1000.0,
            escape(first),
            s = task.status.as_str(),
        );
    }
    page.push_str("</table></body></html>\n");
    page
}

/// An SVG histogram of `values` in 10 equal bins from 0 to the largest.
fn histogram(title: &str, values: &[f64]) -> String {
    const BINS: usize = 10;
    let largest = values.iter().copied().fold(0.0_f64, f64::max);
    let mut counts = [0usize; BINS];
    for value in values {
        let bin = if largest > 0.0 {
            ((value / largest) * BINS as f64) as usize
        } else {
            0
        };
        counts[bin.min(BINS - 1)] += 1;
    }
    let tallest = counts.iter().copied().max().unwrap_or(0).max(1);
    let mut svg = format!(
        "<h2>{}</h2><svg width=\"420\" height=\"140\" role=\"img\">",
        escape(title)
    );
    for (bin, count) in counts.iter().enumerate() {
        let height = 100 * count / tallest;
        let _ = write!(
            svg,
            "<rect x=\"{}\" y=\"{}\" width=\"36\" height=\"{height}\" fill=\"#0969da\"><title>{count}</title></rect><text x=\"{}\" y=\"135\" font-size=\"10\">{:.3}</text>",
            10 + bin * 40,
            110 - height,
            10 + bin * 40,
            largest * (bin + 1) as f64 / BINS as f64
        );
    }
    svg.push_str("</svg>");
    svg
}

#[derive(Default)]
struct Totals {
    done: usize,
    failed: usize,
    stopped: usize,
    cost: f64,
    turns: u64,
    seconds: f64,
}

impl Totals {
    fn of(tasks: &[TaskResult]) -> Self {
        let mut totals = Self::default();
        for task in tasks {
            match task.status {
                Status::Done => totals.done += 1,
                Status::Failed => totals.failed += 1,
                Status::Stopped => totals.stopped += 1,
            }
            totals.cost += task.total_cost_usd.unwrap_or(0.0);
            totals.turns += u64::from(task.num_turns);
            totals.seconds += task.duration_ms as f64 / 1000.0;
        }
        totals
    }

    /// `N task(s): D done, F failed, S stopped; $C; T turns; W s of work` (numbers only,
    /// safe in HTML).
    fn sentence(&self, tasks: usize) -> String {
        format!(
            "{tasks} task(s): {} done, {} failed, {} stopped; ${:.4}; {} turns; {:.1} s of work",
            self.done, self.failed, self.stopped, self.cost, self.turns, self.seconds
        )
    }
}

fn cost(cost: Option<f64>) -> String {
    cost.map_or_else(|| "?".to_owned(), |cost| format!("${cost:.4}"))
}

/// `text` safe inside HTML text and attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(id: &str, status: Status, cost: Option<f64>, result: &str) -> TaskResult {
        let mut task = TaskResult::failed(id, result.to_owned());
        task.status = status;
        task.total_cost_usd = cost;
        task.num_turns = 2;
        task.duration_ms = 1500;
        task
    }

    #[test]
    fn the_table_and_the_page_total_the_tasks_and_escape_what_the_model_wrote() {
        let tasks = [
            task("a", Status::Done, Some(0.5), "Fixed."),
            task("b", Status::Failed, None, "<script>alert(1)</script>"),
        ];
        let text = table(&tasks);
        assert!(
            text.contains("2 task(s): 1 done, 1 failed, 0 stopped; $0.5000; 4 turns; 3.0 s"),
            "{text}"
        );
        let page = html(&tasks);
        assert!(!page.contains("<script>") && page.contains("&lt;script&gt;"));
        assert_eq!(page.matches("<svg").count(), 2);
    }
}
