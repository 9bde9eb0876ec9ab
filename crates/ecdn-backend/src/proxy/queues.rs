//! The proxy's queues (TOFEC §II-A, Fig. 2): the one task that owns the request queue, the
//! task queue and the connections, and moves requests and tasks between them as they arrive
//! and finish (see the parent module's documentation).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::mpsc;

use super::*;
use crate::model::{fit, fit_around};
use crate::store::{Head, Store, StoreFuture};
use crate::strips::{self, Manifest};
use crate::tail::{shared_slowdowns, CodeTable, Excess, Load, RATE_WINDOW, SLOW_WINDOW};
use crate::tofec::{greedy, Strategy, Thresholds};

/// The single task that owns the queues.
pub(super) struct Actor {
    shared: Arc<Shared>,
    /// Where tasks report (the actor keeps a sender, so it closes never).
    me: mpsc::UnboundedSender<Done>,
    queue: VecDeque<Job>,
    tasks: VecDeque<QueuedTask>,
    running: HashMap<u64, Running>,
    active: HashMap<u64, Active>,
    q_bar: f64,
    thresholds: HashMap<(Op, i32, usize), Option<Thresholds>>,
    /// `tofec-tail`: each class's costed codes, each operation's measured excess (read, write),
    /// and the latest [`SLOW_WINDOW`] arrivals: (when, the connections' busy time until then,
    /// the connection time given to the arrivals before it).
    tables: HashMap<(Op, i32, usize), CodeTable>,
    excess: [Excess; 2],
    arrivals: VecDeque<(Instant, f64, f64)>,
    /// Connection time (s, by the model) of the codes given to every arrival so far.
    given: f64,
    /// Connection-seconds the tasks ran, up to `busy_at`.
    busy: f64,
    busy_at: Instant,
    next: u64,
}

impl Actor {
    pub(super) fn new(shared: Arc<Shared>, me: mpsc::UnboundedSender<Done>) -> Actor {
        Actor {
            shared,
            me,
            queue: VecDeque::new(),
            tasks: VecDeque::new(),
            running: HashMap::new(),
            active: HashMap::new(),
            q_bar: 0.0,
            thresholds: HashMap::new(),
            tables: HashMap::new(),
            excess: [Excess::Exponential, Excess::Exponential],
            arrivals: VecDeque::new(),
            given: 0.0,
            busy: 0.0,
            busy_at: Instant::now(),
            next: 0,
        }
    }

    /// Until every [`Proxy`] is dropped and the work begun is done (a write's upload goes on
    /// after its acknowledgement).
    pub(super) async fn run(
        mut self,
        mut jobs: mpsc::UnboundedReceiver<Job>,
        mut done: mpsc::UnboundedReceiver<Done>,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        let mut open = true;
        loop {
            if *stop.borrow() {
                for (_, r) in self.running.drain() {
                    r.abort.abort();
                }
                return; // the replies' senders drop: their callers see Stopped
            }
            if !open && self.running.is_empty() && self.tasks.is_empty() && self.queue.is_empty() {
                return;
            }
            tokio::select! {
                job = jobs.recv(), if open => match job {
                    Some(job) => self.arrive(job),
                    None => open = false,
                },
                Some(d) = done.recv() => self.done(d.task, d.out),
                _ = stop.changed() => continue,
            }
            self.dispatch();
        }
    }

    fn cfg(&self) -> &ProxyConfig {
        &self.shared.cfg
    }

    /// Adds the connection time the running tasks spent since the last tick (called before
    /// `running` changes, and before the load is read).
    fn busy_tick(&mut self) {
        let now = Instant::now();
        let dt = now.duration_since(self.busy_at).as_secs_f64();
        self.busy += self.running.len() as f64 * dt;
        self.busy_at = now;
    }

    /// `tofec-tail`'s load over the last `window` arrivals kept (none yet: no load).
    fn load(&self, window: usize) -> Load {
        let skip = self.arrivals.len().saturating_sub(window);
        let Some(first) = self.arrivals.get(skip) else {
            return Load::default();
        };
        let span = self.busy_at.duration_since(first.0).as_secs_f64();
        if span <= 0.0 {
            return Load::default();
        }
        let kept = self.arrivals.len() - skip;
        Load {
            busy: (self.busy - first.1) / (span * self.cfg().connections.max(1) as f64),
            usage: (self.given - first.2) / kept as f64,
        }
    }

    /// The delay model the operation's fits have reached.
    fn model_of(&self, op: Op) -> DelayModel {
        let m = lock(&self.shared.models);
        if op == Op::Write {
            m.write.0
        } else {
            m.read.0
        }
    }

    fn idle(&self) -> usize {
        self.cfg().connections.saturating_sub(self.running.len())
    }

    /// Algorithm 1, lines 1 to 3 and 7: the backlog folded in, the code chosen, the request
    /// queued.
    fn arrive(&mut self, mut job: Job) {
        lock(&self.shared.counters).requests += 1;
        let q = self.queue.len() as f64;
        let alpha = self.cfg().alpha;
        self.q_bar = alpha * self.q_bar + (1.0 - alpha) * q;
        job.id = self.next;
        self.next += 1;
        job.code = self.choose(&job.kind);
        if let JobKind::Read {
            layout: Layout::Plain(0),
            ..
        } = job.kind
        {
            let served = Served {
                n: 0,
                k: 0,
                queued: Duration::ZERO,
                service: Duration::ZERO,
            };
            let _ = job.reply.send(Ok((Reply::Chunks(Vec::new()), served)));
            return;
        }
        self.queue.push_back(job);
    }

    /// The code for a request of this kind now (lines 4 to 6, or Greedy's, or the static
    /// one), fitted to its file.
    fn choose(&mut self, kind: &JobKind) -> (usize, usize) {
        let shared = self.shared.clone();
        let cfg = &shared.cfg;
        // The dimensions the file allows, and the chunks each gives.
        let (op, size, big_k, big_n, coded) = match kind {
            JobKind::Head { .. } => return (1, 1),
            JobKind::Read {
                layout: Layout::Coded(m),
                ..
            } => (Op::Read, m.size, m.k, m.n, true),
            JobKind::Read {
                layout: Layout::Plain(size),
                ..
            } => (Op::Read, *size, 0, 0, false),
            JobKind::Write { manifest: m, .. } => (Op::Write, m.size, m.k, m.n, true),
        };
        let mut ks: Vec<usize> = if coded {
            Manifest::dimensions(big_k, cfg.k_max)
        } else {
            (1..=cfg.k_max.max(1)).collect()
        };
        if let JobKind::Write { max_k, .. } = kind {
            // No chunks of S3's least part size: the whole file, k = 1.
            ks.retain(|k| k <= max_k.max(&1));
        }
        // TOFEC's tables are per request class: operation, size class, coded file's K.
        let (class, mid) = size_class(size);
        let key = (op, class, if coded { big_k } else { 0 });
        let (n, k) = match cfg.strategy {
            Strategy::Static { n, k } => (n, k),
            Strategy::Greedy => greedy(self.idle(), &ks, cfg.r_max),
            Strategy::Tofec => {
                if !self.thresholds.contains_key(&key) {
                    let model = self.model_of(op);
                    let t = Thresholds::new(
                        &model,
                        mid,
                        cfg.connections,
                        &ks,
                        cfg.r_max,
                        cfg.queue_model,
                    );
                    self.thresholds.insert(key, t);
                }
                match &self.thresholds[&key] {
                    Some(t) => t.code(self.q_bar),
                    None => (1, 1),
                }
            }
            Strategy::TofecTail => {
                let i = usize::from(op == Op::Write);
                if !self.tables.contains_key(&key) {
                    let model = self.model_of(op);
                    let chunks = |k: usize| {
                        if coded {
                            big_n / (big_k / k)
                        } else {
                            k
                        }
                    };
                    let t = CodeTable::new(
                        &model,
                        &self.excess[i],
                        mid,
                        cfg.connections,
                        &ks,
                        cfg.r_max,
                        chunks,
                    );
                    self.tables.insert(key, t);
                }
                self.busy_tick();
                let loads = [self.load(RATE_WINDOW), self.load(SLOW_WINDOW)];
                let c = self.tables[&key].best(&loads);
                self.arrivals
                    .push_back((self.busy_at, self.busy, self.given));
                self.given += c.usage;
                if self.arrivals.len() > SLOW_WINDOW {
                    self.arrivals.pop_front();
                }
                (c.n, c.k)
            }
        };
        // The largest dimension the file allows not above k; n within what it has.
        let k = ks.iter().copied().filter(|&d| d <= k).max().unwrap_or(1);
        if !coded {
            // k ranges of ceil(size / k) bytes: as many as are not empty (a 10-byte object
            // in 6 is 5 ranges of 2).
            let per = size.max(1).div_ceil(k as u64);
            let k = size.max(1).div_ceil(per) as usize;
            return (k, k);
        }
        let chunks = big_n / (big_k / k);
        (n.clamp(k, chunks), k)
    }

    /// Work conservation: idle connections take queued tasks; the head request leaves its
    /// queue only when the task queue is empty.
    fn dispatch(&mut self) {
        while self.idle() > 0 {
            if let Some(t) = self.tasks.pop_front() {
                self.start(t);
            } else if let Some(job) = self.queue.pop_front() {
                self.begin(job);
            } else {
                break;
            }
        }
    }

    /// The request at the head of the queue becomes its tasks.
    fn begin(&mut self, job: Job) {
        let (n, k) = job.code;
        let store = self.shared.store.clone();
        let now = Instant::now();
        let mut active = Active {
            kind: JobKind::Head { key: String::new() },
            code: job.code,
            arrival: job.arrival,
            started: now,
            reply: Some(job.reply),
            ok: Vec::new(),
            outstanding: 0,
            next_chunk: n,
            chunks: n,
            retried: Vec::new(),
            stored: 0,
            failed: 0,
            rest: None,
            rest_bytes: 0,
            slow_together: None,
            held: Vec::new(),
        };
        let mut tasks = Vec::new();
        match job.kind {
            JobKind::Head { key } => {
                let fut = store.head(&key);
                tasks.push((0, 0, Op::Head, map_head(fut)));
                active.kind = JobKind::Head { key };
            }
            JobKind::Read { key, layout } => {
                for c in 0..n {
                    let (bytes, fut) = read_task(&store, &key, &layout, k, c);
                    tasks.push((c, bytes, Op::Read, fut));
                }
                if let Layout::Coded(m) = &layout {
                    active.chunks = m.n / (m.k / k);
                }
                active.kind = JobKind::Read { key, layout };
            }
            JobKind::Write {
                key,
                file,
                manifest,
                mut upload,
                max_k,
                finished,
            } => {
                match upload.as_mut() {
                    None => {
                        // Too small for parts of S3's least size: n PUTs of the whole file
                        // race, the first stored wins.
                        let meta = manifest.to_metadata();
                        for c in 0..n {
                            let fut = store.put(&key, file.clone(), Some(meta.clone()));
                            tasks.push((c, file.len() as u64, Op::Write, map_stored(fut)));
                        }
                    }
                    Some(upload) => {
                        // Parts in order: the n chunks, then the strips after them.
                        for c in 0..n {
                            let r = manifest.chunk_range(k, c);
                            let part = file.slice(r.start as usize..r.end as usize);
                            let bytes = part.len() as u64;
                            tasks.push((c, bytes, Op::Write, map_stored(upload.part(part))));
                        }
                        let end = manifest.chunk_range(k, n).start as usize;
                        if end < file.len() {
                            active.rest_bytes = (file.len() - end) as u64;
                            active.rest = Some(map_stored(upload.part(file.slice(end..))));
                        }
                    }
                }
                active.kind = JobKind::Write {
                    key,
                    file: Bytes::new(),
                    manifest,
                    upload,
                    max_k,
                    finished,
                };
            }
        }
        active.outstanding = tasks.len();
        for (index, bytes, op, fut) in tasks {
            self.tasks.push_back(QueuedTask {
                job: job.id,
                index,
                bytes,
                op,
                fut,
            });
        }
        self.active.insert(job.id, active);
    }

    fn start(&mut self, t: QueuedTask) {
        self.busy_tick();
        let id = self.next;
        self.next += 1;
        let me = self.me.clone();
        let timeout = self.cfg().task_timeout;
        let fut = t.fut;
        let handle = tokio::spawn(async move {
            let out = match tokio::time::timeout(timeout, fut).await {
                Ok(Ok(o)) => Ok(o),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err(format!("no answer within {timeout:?}")),
            };
            let _ = me.send(Done { task: id, out });
        });
        lock(&self.shared.counters).tasks_started += 1;
        self.running.insert(
            id,
            Running {
                job: t.job,
                index: t.index,
                op: t.op,
                bytes: t.bytes,
                started: Instant::now(),
                abort: handle.abort_handle(),
            },
        );
    }

    /// A task finished (or failed): its delay recorded, its request advanced.
    fn done(&mut self, task: u64, out: Result<TaskOut, String>) {
        self.busy_tick();
        // A task cancelled meanwhile: its connection was freed then.
        let Some(r) = self.running.remove(&task) else {
            return;
        };
        let elapsed = r.started.elapsed();
        match &out {
            Ok(_) => {
                lock(&self.shared.counters).tasks_completed += 1;
                if let Some(together) = self.hold(r.job, r.op, r.bytes, elapsed) {
                    self.record(r.op, r.bytes, elapsed, false, together);
                }
            }
            Err(_) => lock(&self.shared.counters).tasks_failed += 1,
        }
        let Some(a) = self.active.get_mut(&r.job) else {
            return;
        };
        a.outstanding -= 1;
        match (&a.kind, out) {
            (JobKind::Write { .. }, out) => {
                if out.is_ok() {
                    a.stored += 1;
                } else {
                    a.failed += 1;
                }
                self.write_progress(r.job);
            }
            (_, Ok(TaskOut::Head(h))) => self.reply(r.job, Ok(Reply::Head(h))),
            (JobKind::Read { layout, key }, Ok(TaskOut::Bytes(b))) => {
                let good = match layout {
                    Layout::Coded(m) => {
                        let checked = strips::check_chunk(m, a.code.1, r.index, &b);
                        checked.is_ok()
                    }
                    Layout::Plain(_) => true,
                };
                if good {
                    a.ok.push((r.index, b));
                    if a.ok.len() >= a.code.1 {
                        let chunks = std::mem::take(&mut a.ok);
                        self.reply(r.job, Ok(Reply::Chunks(chunks)));
                    }
                } else {
                    lock(&self.shared.counters).corrupt_chunks += 1;
                    let key = key.clone();
                    self.read_failed(r.job, r.index, &key, "a chunk failed its CRC");
                }
            }
            (JobKind::Read { key, .. }, Err(why)) => {
                let key = key.clone();
                self.read_failed(r.job, r.index, &key, &why);
            }
            (JobKind::Head { key }, Err(why)) => {
                let e = failed(key, &why);
                self.reply(r.job, Err(e));
            }
            (kind, Ok(_)) => {
                let e = failed(kind.key(), "a task answered something else");
                self.reply(r.job, Err(e));
            }
        }
    }

    /// A read's task failed: another chunk (or the same plain range once more) at the head of
    /// the task queue, or the request fails when `k` can no longer arrive.
    fn read_failed(&mut self, job: u64, index: usize, key: &str, why: &str) {
        let store = self.shared.store.clone();
        let Some(a) = self.active.get_mut(&job) else {
            return;
        };
        let JobKind::Read { layout, .. } = &a.kind else {
            return;
        };
        let k = a.code.1;
        let again = match layout {
            Layout::Coded(_) if a.next_chunk < a.chunks => {
                a.next_chunk += 1;
                Some(a.next_chunk - 1)
            }
            Layout::Plain(_) if !a.retried.contains(&index) => {
                a.retried.push(index);
                Some(index)
            }
            _ => None,
        };
        if let Some(c) = again {
            let (bytes, fut) = read_task(&store, key, layout, k, c);
            a.outstanding += 1;
            self.tasks.push_front(QueuedTask {
                job,
                index: c,
                bytes,
                op: Op::Read,
                fut,
            });
        } else if a.ok.len() + a.outstanding < k {
            let e = failed(
                key,
                &format!("fewer than k = {k} chunks could be read ({why})"),
            );
            self.reply(job, Err(e));
        }
    }

    /// A write's part finished: the acknowledgement after `k`, the last part queued then, the
    /// upload completed (or aborted) when nothing is outstanding.
    fn write_progress(&mut self, job: u64) {
        self.settle(job, false);
        let Some(a) = self.active.get_mut(&job) else {
            return;
        };
        let k = a.code.1;
        let whole = matches!(a.kind, JobKind::Write { upload: None, .. });
        if whole && a.stored > 0 {
            // The race is won: the file is stored and readable; the other PUTs are cancelled
            // (one that S3 completes anyway stores the same bytes).
            let served = served(a);
            let reply = a.reply.take();
            let together = a.slow_together == Some(true);
            self.cancel(job, together);
            if let Some(JobKind::Write { finished, .. }) = self.active.remove(&job).map(|a| a.kind)
            {
                let _ = finished.send(Ok(()));
            }
            if let Some(tx) = reply {
                let _ = tx.send(Ok((Reply::Written, served)));
            }
            return;
        }
        if a.reply.is_some() && a.stored >= k {
            let served = served(a);
            if let Some(tx) = a.reply.take() {
                let _ = tx.send(Ok((Reply::Written, served)));
            }
            if let Some(fut) = a.rest.take() {
                a.outstanding += 1;
                self.tasks.push_back(QueuedTask {
                    job,
                    index: usize::MAX,
                    bytes: a.rest_bytes,
                    op: Op::Write,
                    fut,
                });
                return;
            }
        }
        let Some(a) = self.active.get_mut(&job) else {
            return;
        };
        if a.outstanding > 0 {
            return;
        }
        self.settle(job, true);
        let Some(a) = self.active.remove(&job) else {
            return;
        };
        let JobKind::Write {
            key,
            upload,
            finished,
            ..
        } = a.kind
        else {
            return;
        };
        let shared = self.shared.clone();
        let (failed_parts, reply) = (a.failed, a.reply);
        tokio::spawn(async move {
            let result = match upload {
                // Every racing PUT failed (one stored would have ended the race).
                None => Err(format!("{failed_parts} PUTs of the whole file failed")),
                Some(upload) if failed_parts > 0 => {
                    let _ = upload.abort().await;
                    Err(format!("{failed_parts} parts failed"))
                }
                Some(upload) => upload.complete().await.map_err(|e| e.to_string()),
            };
            let _ = finished.send(result.clone().map_err(|why| failed(&key, &why)));
            match (result, reply) {
                (Err(why), Some(tx)) => {
                    let _ = tx.send(Err(failed(&key, &why)));
                }
                (Err(why), None) => {
                    lock(&shared.counters).writes_lost += 1;
                    eprintln!("ecdn backend: the write of {key} was lost after its acknowledgement: {why}");
                }
                (Ok(()), Some(tx)) => {
                    // Fewer than k parts before the end: every part stored after all.
                    let served = Served {
                        n: a.code.0,
                        k: a.code.1,
                        queued: a.started - a.arrival,
                        service: a.started.elapsed(),
                    };
                    let _ = tx.send(Ok((Reply::Written, served)));
                }
                (Ok(()), None) => {}
            }
        });
    }

    /// Answers a read or head request and cancels its other tasks.
    fn reply(&mut self, job: u64, r: Result<Reply, ProxyError>) {
        self.settle(job, true);
        let Some(mut a) = self.active.remove(&job) else {
            return;
        };
        let served = served(&a);
        self.cancel(job, a.slow_together == Some(true));
        if let Some(tx) = a.reply.take() {
            let _ = tx.send(r.map(|reply| (reply, served)));
        }
    }

    /// Drops a request's queued tasks and aborts its running ones (their delays recorded as
    /// lower bounds, `together` if the request was slow together).
    fn cancel(&mut self, job: u64, together: bool) {
        self.busy_tick();
        self.tasks.retain(|t| t.job != job);
        let ids: Vec<u64> = self
            .running
            .iter()
            .filter(|(_, r)| r.job == job)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            if let Some(r) = self.running.remove(&id) {
                r.abort.abort();
                lock(&self.shared.counters).tasks_cancelled += 1;
                self.record(r.op, r.bytes, r.started.elapsed(), true, together);
            }
        }
    }

    /// `tofec-tail`: a completed task's sample is held with its request until the request
    /// is settled ([`Self::settle`]); `Some(slow together)` when it is to be recorded now (other
    /// strategies: not slow together).
    fn hold(&mut self, job: u64, op: Op, bytes: u64, delay: Duration) -> Option<bool> {
        if self.cfg().strategy != Strategy::TofecTail || op == Op::Head {
            return Some(false);
        }
        let Some(a) = self.active.get_mut(&job) else {
            return Some(false);
        };
        if let Some(together) = a.slow_together {
            return Some(together);
        }
        a.held.push((bytes, delay));
        None
    }

    /// Decides whether `job` was slow together once `k` of its tasks completed (or, `force`d,
    /// when it ends before: not), and records the samples it held.
    fn settle(&mut self, job: u64, force: bool) {
        let Some(a) = self.active.get(&job) else {
            return;
        };
        let (n, k) = a.code;
        // Nothing held (other strategies, heads): nothing to decide or record.
        if a.held.is_empty() || a.slow_together.is_some() || (a.held.len() < k && !force) {
            return;
        }
        let op = if matches!(a.kind, JobKind::Write { .. }) {
            Op::Write
        } else {
            Op::Read
        };
        let model = self.model_of(op);
        let excess = &self.excess[usize::from(op == Op::Write)];
        let mut delays: Vec<f64> = a.held.iter().map(|h| h.1.as_secs_f64()).collect();
        delays.sort_by(f64::total_cmp);
        let bytes = a.held.iter().map(|h| h.0).max().unwrap_or(0);
        let together =
            k >= 1 && delays.len() >= k && excess.slow_together(&model, bytes, delays[k - 1], n, k);
        let Some(a) = self.active.get_mut(&job) else {
            return;
        };
        a.slow_together = Some(together);
        for (bytes, delay) in std::mem::take(&mut a.held) {
            self.record(op, bytes, delay, false, together);
        }
    }

    /// Records a task's delay; refits the operation's model every `refit_every` completions.
    fn record(&mut self, op: Op, bytes: u64, delay: Duration, censored: bool, together: bool) {
        let shared = self.shared.clone();
        let cfg = &shared.cfg;
        let mut models = lock(&shared.models);
        let slot = match op {
            Op::Read => &mut models.read,
            Op::Write => &mut models.write,
            Op::Head => return,
        };
        slot.1.push_back(TaskSample {
            bytes,
            delay: delay.as_secs_f64(),
            censored,
            slow_together: together,
        });
        while slot.1.len() > cfg.samples_kept {
            slot.1.pop_front();
        }
        if censored {
            return;
        }
        slot.2 += 1;
        if cfg.refit_every == 0 || slot.2 < cfg.refit_every {
            return;
        }
        slot.2 = 0;
        let samples = shared_slowdowns(slot.1.iter().copied().collect());
        let fitted = if cfg.strategy == Strategy::TofecTail {
            // One code, one chunk size: the prior scaled to it (`fit_around`).
            let prior = match op {
                Op::Write => cfg.write_model,
                _ => cfg.read_model,
            };
            fit_around(&samples, cfg.fit_trim, &prior)
        } else {
            fit(&samples, cfg.fit_trim).map(|(m, _)| m)
        };
        if let Some(m) = fitted.filter(|m| m.is_valid()) {
            slot.0 = m;
            drop(models);
            lock(&shared.counters).fits += 1;
            self.thresholds.retain(|k, _| k.0 != op);
            if cfg.strategy == Strategy::TofecTail {
                let i = usize::from(op == Op::Write);
                if let Some(e) = Excess::measure(&samples, &m) {
                    self.excess[i] = e;
                }
                self.tables.retain(|k, _| k.0 != op);
            }
        }
    }
}

fn served(a: &Active) -> Served {
    Served {
        n: a.code.0,
        k: a.code.1,
        queued: a.started - a.arrival,
        service: a.started.elapsed(),
    }
}

/// Chunk `c` of a read with dimension `k`: its size and its task.
fn read_task(
    store: &Arc<dyn Store>,
    key: &str,
    layout: &Layout,
    k: usize,
    c: usize,
) -> (u64, StoreFuture<TaskOut>) {
    let range = match layout {
        Layout::Coded(m) => m.chunk_range(k, c),
        Layout::Plain(size) => {
            let per = size.div_ceil(k as u64);
            (c as u64 * per).min(*size)..((c as u64 + 1) * per).min(*size)
        }
    };
    let bytes = range.end - range.start;
    let fut = store.get_range(key, range);
    (
        bytes,
        Box::pin(async move { fut.await.map(TaskOut::Bytes) }),
    )
}

fn map_head(f: StoreFuture<Option<Head>>) -> StoreFuture<TaskOut> {
    Box::pin(async move { f.await.map(TaskOut::Head) })
}

fn map_stored(f: StoreFuture<()>) -> StoreFuture<TaskOut> {
    Box::pin(async move { f.await.map(|()| TaskOut::Stored) })
}
