//! What a person watching a batch sees: a progress bar at a terminal, a line per task
//! elsewhere.

use super::{Status, Summary, TaskResult};

/// Told of a batch's progress.
pub trait Progress: Send {
    /// The batch starts with `todo` tasks to run, `skipped` done earlier.
    fn begin(&mut self, todo: usize, skipped: usize);
    /// Task `id` started.
    fn started(&mut self, id: &str);
    /// A task ended; the batch has cost `cost_usd` so far.
    fn finished(&mut self, result: &TaskResult, cost_usd: f64);
    /// Something to say.
    fn note(&mut self, text: &str);
    /// The batch ended.
    fn end(&mut self, summary: &Summary);
}

/// The counts a display shows.
#[derive(Debug, Default)]
struct Counts {
    done: usize,
    failed: usize,
    stopped: usize,
    running: usize,
    cost_usd: f64,
}

impl Counts {
    fn finished(&mut self, result: &TaskResult, cost_usd: f64) {
        self.running = self.running.saturating_sub(1);
        self.cost_usd = cost_usd;
        match result.status {
            Status::Done => self.done += 1,
            Status::Failed => self.failed += 1,
            Status::Stopped => self.stopped += 1,
        }
    }

    fn line(&self) -> String {
        format!(
            "{} done, {} running, {} failed, {} stopped, ${:.4}",
            self.done, self.running, self.failed, self.stopped, self.cost_usd
        )
    }
}

/// One line per task on stderr (`agent batch: fix-1 done in 12.3 s, $0.04: Fixed.`), for
/// logs and CI.
#[derive(Debug, Default)]
pub struct LineProgress {
    counts: Counts,
}

impl Progress for LineProgress {
    fn begin(&mut self, todo: usize, skipped: usize) {
        eprintln!("agent batch: {todo} task(s) to run, {skipped} done earlier");
    }

    fn started(&mut self, _id: &str) {
        self.counts.running += 1;
    }

    fn finished(&mut self, result: &TaskResult, cost_usd: f64) {
        self.counts.finished(result, cost_usd);
        eprintln!("agent batch: {}", describe(result));
    }

    fn note(&mut self, text: &str) {
        eprintln!("agent batch: {text}");
    }

    fn end(&mut self, summary: &Summary) {
        eprintln!("agent batch: {}{}", self.counts.line(), unstarted(summary));
    }
}

/// A progress bar on stderr (done of all, the counts, cost so far, an ETA), with a line
/// above it per task that did not end done.
#[derive(Debug)]
pub struct TerminalProgress {
    bar: indicatif::ProgressBar,
    counts: Counts,
}

impl Default for TerminalProgress {
    fn default() -> Self {
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(0),
            indicatif::ProgressDrawTarget::stderr(),
        );
        // The template is a constant: it parses.
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{bar:30} {pos}/{len} · {msg} · {elapsed} (about {eta} left)",
        ) {
            bar.set_style(style);
        }
        Self {
            bar,
            counts: Counts::default(),
        }
    }
}

impl Progress for TerminalProgress {
    fn begin(&mut self, todo: usize, skipped: usize) {
        self.bar.set_length(todo as u64);
        if skipped > 0 {
            self.bar
                .println(format!("{skipped} task(s) done earlier: skipped"));
        }
        self.bar.set_message(self.counts.line());
    }

    fn started(&mut self, _id: &str) {
        self.counts.running += 1;
        self.bar.set_message(self.counts.line());
    }

    fn finished(&mut self, result: &TaskResult, cost_usd: f64) {
        self.counts.finished(result, cost_usd);
        if result.status != Status::Done {
            self.bar.println(describe(result));
        }
        self.bar.inc(1);
        self.bar.set_message(self.counts.line());
    }

    fn note(&mut self, text: &str) {
        self.bar.println(text);
    }

    fn end(&mut self, summary: &Summary) {
        self.bar.finish_and_clear();
        eprintln!("agent batch: {}{}", self.counts.line(), unstarted(summary));
    }
}

/// `id status in 1.2 s, $0.01: first line of the result`.
fn describe(result: &TaskResult) -> String {
    let status = result.status.as_str();
    let cost = result
        .total_cost_usd
        .map_or_else(|| "cost unknown".to_owned(), |cost| format!("${cost:.4}"));
    let first = result.result.lines().next().unwrap_or_default();
    format!(
        "{} {status} in {:.1} s, {cost}: {}",
        result.id,
        result.duration_ms as f64 / 1000.0,
        render::printable(first, false)
    )
}

fn unstarted(summary: &Summary) -> String {
    if summary.not_started == 0 {
        String::new()
    } else {
        format!(
            "; {} not started (run the same command again to go on)",
            summary.not_started
        )
    }
}
