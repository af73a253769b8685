//! Admission to the second cache tier: which evicted pages are copied in. After NVCache's
//! throttling: the overhead-bypass ratio, OBP = (pages inserted + pages dropped) / pages
//! looked up, kept under a limit over a sliding window of about a second, with hysteresis.
//! Each worker is a lane with its own window and decision (`worker_context::lane`).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The events an admission policy hears of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TierEvent {
    /// A pool miss looked in the tier.
    Lookup,
    /// A page was copied in.
    Insert,
    /// A copy was dropped (invalidated, or pushed out).
    Delete,
}

/// Decides whether an evicted page is copied into the tier. Calls name the caller's lane:
/// `1 + its worker's index` on a worker, 0 on any other thread (`worker_context::lane`);
/// a policy may decide per lane or for all.
pub trait Admission: Send + Sync + std::fmt::Debug {
    /// Whether to copy a page in now.
    fn admit(&self, lane: usize) -> bool;
    /// Hears of one event.
    fn note(&self, lane: usize, event: TierEvent);
    /// What the policy measured of OBP, where it measures it.
    fn measured(&self) -> Measured {
        Measured::default()
    }
    /// Whether it would admit on some lane now.
    fn admitting(&self) -> bool;
}

/// What an admission policy measured of the overhead-bypass ratio ([`TierStats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Measured {
    /// The last full window's ratio, the highest of the lanes'.
    pub obp: f64,
    /// The highest of any full window so far.
    pub obp_max: f64,
    /// Full windows measured.
    pub windows: u64,
    /// Of those, the windows whose ratio passed the limit.
    pub windows_over: u64,
}

/// The limit windows of a policy that only measures are counted against.
const MEASURED_LIMIT: f64 = 0.10;

/// [`TierAdmission::All`]: admits everything, and measures OBP per lane as `ObpAdmission`
/// would (to show what admitting everything costs).
#[derive(Debug)]
pub struct AdmitAll(Box<[Lane]>);

impl AdmitAll {
    /// For `lanes` lanes (workers + 1).
    pub fn new(lanes: usize) -> AdmitAll {
        AdmitAll(lanes_of(lanes, MEASURED_LIMIT))
    }
}

impl Admission for AdmitAll {
    fn admit(&self, _: usize) -> bool {
        true
    }
    fn note(&self, lane: usize, event: TierEvent) {
        lane_of(&self.0, lane).window.note(event, Instant::now());
    }
    fn measured(&self) -> Measured {
        measured(&self.0)
    }
    fn admitting(&self) -> bool {
        true
    }
}

/// [`TierAdmission::Never`].
#[derive(Debug, Default)]
pub struct AdmitNone;

impl Admission for AdmitNone {
    fn admit(&self, _: usize) -> bool {
        false
    }
    fn note(&self, _: usize, _: TierEvent) {}
    fn admitting(&self) -> bool {
        false
    }
}

/// One lane's window and decision, alone in its cache lines (the lanes' counters change on
/// every lookup of their workers).
#[derive(Debug)]
#[repr(align(128))]
struct Lane {
    window: ObpWindow,
    admitting: AtomicBool,
}

fn lanes_of(lanes: usize, limit: f64) -> Box<[Lane]> {
    (0..lanes.max(1))
        .map(|_| Lane { window: ObpWindow::new(limit), admitting: AtomicBool::new(true) })
        .collect()
}

/// The lane of a caller; lanes past the last (more workers than the tier was opened for)
/// share the last.
#[inline]
fn lane_of(lanes: &[Lane], lane: usize) -> &Lane {
    &lanes[lane.min(lanes.len() - 1)]
}

fn measured(lanes: &[Lane]) -> Measured {
    lanes.iter().fold(Measured::default(), |m, lane| {
        let w = lane.window.state.lock().unwrap();
        Measured {
            obp: m.obp.max(w.obp),
            obp_max: m.obp_max.max(w.obp_max),
            windows: m.windows + w.windows,
            windows_over: m.windows_over + w.windows_over,
        }
    })
}

/// Buckets of the sliding window, and how long each lasts: ten of 100 ms.
const BUCKETS: usize = 10;
const BUCKET: Duration = Duration::from_millis(100);

/// The overhead-bypass ratio over a sliding window of `BUCKETS` buckets of `BUCKET` each:
/// the bucket filling now and the `BUCKETS - 1` before it.
#[derive(Debug)]
struct ObpWindow {
    /// Counts of the bucket filling now: lookups, inserts, deletes.
    lookups: AtomicU64,
    inserts: AtomicU64,
    deletes: AtomicU64,
    /// The sums of the closed buckets in the window (lookups, changes), for the check made
    /// every 64 events without the lock.
    closed_lookups: AtomicU64,
    closed_changes: AtomicU64,
    /// Events since the ratio was last looked at (it is, once per 64).
    since_check: AtomicU32,
    /// Full windows above this ratio are counted (`Window::windows_over`).
    limit: f64,
    state: Mutex<Window>,
}

#[derive(Debug)]
struct Window {
    started: Instant,
    /// Closed buckets, oldest first: (lookups, inserts + deletes).
    closed: std::collections::VecDeque<(u64, u64)>,
    /// The ratio of the last closed full window, and the highest so far.
    obp: f64,
    obp_max: f64,
    /// Full windows closed, and those above the limit.
    windows: u64,
    windows_over: u64,
}

impl ObpWindow {
    fn new(limit: f64) -> Self {
        ObpWindow {
            lookups: AtomicU64::new(0),
            inserts: AtomicU64::new(0),
            deletes: AtomicU64::new(0),
            closed_lookups: AtomicU64::new(0),
            closed_changes: AtomicU64::new(0),
            since_check: AtomicU32::new(0),
            limit,
            state: Mutex::new(Window {
                started: Instant::now(),
                closed: std::collections::VecDeque::with_capacity(BUCKETS),
                obp: 0.0,
                obp_max: 0.0,
                windows: 0,
                windows_over: 0,
            }),
        }
    }
}

/// `changes / lookups`, as the run's own ratio is counted (so a window's figures and a
/// run's compare); with no lookups, as if there had been one (changes alone, a write-heavy
/// spell with nothing for the tier to serve, are over any limit).
fn ratio(lookups: u64, changes: u64) -> f64 {
    changes as f64 / lookups.max(1) as f64
}

impl ObpWindow {
    /// Counts `event`. Once per 64 events, returns the ratio over the window as it is now
    /// (the bucket filling included, so that admission stops within 64 events of passing
    /// its limit, not a bucket later), closing the bucket first if its time is up.
    fn note(&self, event: TierEvent, now: Instant) -> Option<f64> {
        match event {
            TierEvent::Lookup => &self.lookups,
            TierEvent::Insert => &self.inserts,
            TierEvent::Delete => &self.deletes,
        }
        .fetch_add(1, Ordering::Relaxed);
        if self.since_check.fetch_add(1, Ordering::Relaxed) % 64 != 63 {
            return None;
        }
        if let Some(obp) = self.roll(now) {
            return Some(obp);
        }
        let (lookups, changes) = self.current();
        Some(ratio(lookups, changes))
    }

    /// The window as it is now (the bucket filling included): lookups, and changes.
    fn current(&self) -> (u64, u64) {
        let lookups =
            self.closed_lookups.load(Ordering::Relaxed) + self.lookups.load(Ordering::Relaxed);
        let changes = self.closed_changes.load(Ordering::Relaxed)
            + self.inserts.load(Ordering::Relaxed)
            + self.deletes.load(Ordering::Relaxed);
        (lookups, changes)
    }

    /// Closes the bucket filling now if its time is up at `now` (and empty ones for an idle
    /// spell); returns the ratio of the window it ends.
    fn roll(&self, now: Instant) -> Option<f64> {
        let mut window = self.state.lock().unwrap();
        if now.duration_since(window.started) < BUCKET {
            return None;
        }
        let lookups = self.lookups.swap(0, Ordering::Relaxed);
        let changes =
            self.inserts.swap(0, Ordering::Relaxed) + self.deletes.swap(0, Ordering::Relaxed);
        // Buckets that passed with nothing counted (an idle spell) close empty.
        let elapsed = now.duration_since(window.started);
        let idle = ((elapsed.as_nanos() / BUCKET.as_nanos()) as usize).saturating_sub(1);
        for _ in 0..idle.min(BUCKETS) {
            window.closed.push_back((0, 0));
        }
        window.closed.push_back((lookups, changes));
        while window.closed.len() > BUCKETS {
            window.closed.pop_front();
        }
        window.started = now;
        let (lookups, changes) =
            window.closed.iter().fold((0, 0), |(l, c), &(bl, bc)| (l + bl, c + bc));
        let obp = ratio(lookups, changes);
        window.obp = obp;
        if window.closed.len() == BUCKETS {
            window.obp_max = window.obp_max.max(obp);
            window.windows += 1;
            window.windows_over += u64::from(obp > self.limit);
        }
        // The newest `BUCKETS - 1` closed buckets, with the one filling from now on, are
        // the window the checks between rolls look at.
        let older = window.closed.len().saturating_sub(BUCKETS - 1);
        let (recent_lookups, recent_changes) =
            window.closed.iter().skip(older).fold((0, 0), |(l, c), &(bl, bc)| (l + bl, c + bc));
        self.closed_lookups.store(recent_lookups, Ordering::Relaxed);
        self.closed_changes.store(recent_changes, Ordering::Relaxed);
        Some(obp)
    }
}

/// [`TierAdmission::Obp`]: admits while the overhead-bypass ratio stays under `stop`, and
/// again once it falls below `resume`; each lane measures and decides for itself.
#[derive(Debug)]
pub struct ObpAdmission {
    stop: f64,
    resume: f64,
    lanes: Box<[Lane]>,
}

impl ObpAdmission {
    /// Admits while the ratio stays at or under `stop`; stopped, admits again below `resume`.
    /// For `lanes` lanes (workers + 1).
    pub fn new(stop: f64, resume: f64, lanes: usize) -> ObpAdmission {
        ObpAdmission { stop, resume, lanes: lanes_of(lanes, stop) }
    }

    /// [`Admission::note`] at a given time (tests feed synthetic streams).
    pub fn note_at(&self, lane: usize, event: TierEvent, now: Instant) {
        let lane = lane_of(&self.lanes, lane);
        if let Some(obp) = lane.window.note(event, now) {
            self.decide(lane, obp);
        }
    }

    /// Closes the buckets of `lane` due at `now` (tests).
    pub fn roll_at(&self, lane: usize, now: Instant) {
        let lane = lane_of(&self.lanes, lane);
        if let Some(obp) = lane.window.roll(now) {
            self.decide(lane, obp);
        }
    }

    fn decide(&self, lane: &Lane, obp: f64) {
        let admitting = lane.admitting.load(Ordering::Relaxed);
        if admitting && obp > self.stop {
            lane.admitting.store(false, Ordering::Relaxed);
        } else if !admitting && obp < self.resume {
            lane.admitting.store(true, Ordering::Relaxed);
        }
    }
}

impl Admission for ObpAdmission {
    /// While admitting, each copy is also checked against the window as it is: refused if
    /// it (and the copy it may push out) would take the ratio past the middle of the band
    /// between `resume` and `stop`. The controller's own check, every 64 events, lets a
    /// copy or two too many through before it stops; and a window held at the limit itself
    /// passes it as soon as an old bucket rich in lookups slides out, or pages change (an
    /// invalidation is no admission's to refuse). The half band is the headroom for both.
    fn admit(&self, lane: usize) -> bool {
        let lane = lane_of(&self.lanes, lane);
        if !lane.admitting.load(Ordering::Relaxed) {
            return false;
        }
        let (lookups, changes) = lane.window.current();
        let cap = (self.stop + self.resume) / 2.0;
        (changes + 2) as f64 <= cap * lookups.max(1) as f64
    }
    fn note(&self, lane: usize, event: TierEvent) {
        self.note_at(lane, event, Instant::now());
    }
    fn measured(&self) -> Measured {
        measured(&self.lanes)
    }
    fn admitting(&self) -> bool {
        self.lanes.iter().any(|lane| lane.admitting.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The controller against synthetic streams: a stream the tier helps (few inserts per
    /// lookup) keeps it admitting; one it cannot help (an insert per lookup) stops it within
    /// a window, and it resumes once the ratio falls below the lower mark.
    #[test]
    fn obp_stops_above_its_limit_and_resumes_below_the_lower_mark() {
        let obp = ObpAdmission::new(0.10, 0.08, 1);
        let start = Instant::now();
        let mut now = start;
        let mut feed = |lookups: u64, changes: u64, buckets: u32, obp: &ObpAdmission| {
            for _ in 0..buckets {
                for _ in 0..lookups {
                    obp.note_at(0, TierEvent::Lookup, now);
                }
                for _ in 0..changes {
                    obp.note_at(0, TierEvent::Insert, now);
                }
                now += BUCKET;
                obp.roll_at(0, now);
            }
        };
        // 5 % for two seconds: admitting.
        feed(1000, 50, 20, &obp);
        assert!(obp.admit(0));
        assert!((obp.measured().obp - 0.05).abs() < 0.01, "{:?}", obp.measured());
        // A cache-hostile spell: one change per lookup. Admission stops within a window.
        feed(1000, 1000, 3, &obp);
        assert!(!obp.admit(0), "{:?}", obp.measured());
        // 9 %: between the marks, it stays stopped (hysteresis).
        feed(1000, 90, 20, &obp);
        assert!(!obp.admit(0), "{:?}", obp.measured());
        // 7 %: it resumes.
        feed(1000, 70, 20, &obp);
        assert!(obp.admit(0), "{:?}", obp.measured());
        let measured = obp.measured();
        assert!(measured.obp_max > 0.3, "the hostile window is the highest: {measured:?}");
        // Windows are counted from the tenth bucket on, one per bucket: 63 buckets fed, 54
        // full windows. Those over 10 % are the ones holding a hostile bucket (the three
        // hostile buckets enter them one at a time, and leave after ten).
        assert_eq!(measured.windows, 54, "{measured:?}");
        assert!((10..=13).contains(&measured.windows_over), "{measured:?}");
    }

    /// Admission stops within the bucket in which the ratio passes its limit (checked every
    /// 64 events), not a bucket later: a burst of copies cannot fill a whole bucket.
    #[test]
    fn obp_stops_inside_the_bucket_that_passes_the_limit() {
        let obp = ObpAdmission::new(0.10, 0.08, 1);
        let mut now = Instant::now();
        for _ in 0..BUCKETS {
            for i in 0..1000 {
                obp.note_at(
                    0,
                    if i % 25 == 0 { TierEvent::Insert } else { TierEvent::Lookup },
                    now,
                );
            }
            now += BUCKET;
            obp.roll_at(0, now);
        }
        assert!(obp.admit(0));
        // One copy per lookup from here, all inside one bucket.
        let mut copies = 0;
        while obp.admit(0) {
            obp.note_at(0, TierEvent::Lookup, now);
            obp.note_at(0, TierEvent::Insert, now);
            copies += 1;
            assert!(copies < 2_000, "still admitting after {copies} copies");
        }
        // The window's other buckets hold 8,640 lookups and 360 copies: the limit is passed
        // after about 560 more copies (and lookups), checked every 64 events.
        assert!((300..1_000).contains(&copies), "stopped after {copies} copies");
    }

    /// Each lane decides for itself: a worker whose misses the tier cannot help stops
    /// admitting, and the worker beside it, whose misses it helps, goes on.
    #[test]
    fn obp_is_measured_and_decided_per_lane() {
        let obp = ObpAdmission::new(0.10, 0.08, 3);
        let mut now = Instant::now();
        for _ in 0..2 * BUCKETS {
            for i in 0..1000 {
                // Lane 1: one copy per 50 lookups. Lane 2: a copy per lookup.
                obp.note_at(
                    1,
                    if i % 50 == 0 { TierEvent::Insert } else { TierEvent::Lookup },
                    now,
                );
                obp.note_at(2, TierEvent::Lookup, now);
                obp.note_at(2, TierEvent::Insert, now);
            }
            now += BUCKET;
            obp.roll_at(1, now);
            obp.roll_at(2, now);
        }
        assert!(obp.admit(1) && !obp.admit(2));
        assert!(!obp.admit(0), "a lane that looked nothing up has nothing to serve");
        for _ in 0..40 {
            obp.note_at(0, TierEvent::Lookup, now);
        }
        assert!(obp.admit(0), "two changes in 40 lookups: within 9 %");
        assert!(!obp.admit(7), "lanes past the last share the last");
        let measured = obp.measured();
        assert!((measured.obp - 1.0).abs() < 1e-9, "the worst lane's: {measured:?}");
        // Lane 2's windows are all over the limit, lane 1's none.
        assert_eq!((measured.windows, measured.windows_over), (22, 11), "{measured:?}");
    }

    /// Each copy is checked against the window as it stands: a lane that keeps offering
    /// every page it evicts never takes its window past the limit, between the controller's
    /// checks or at them (each copy counted with the copy it pushes out), and holds it near
    /// the middle of the band.
    #[test]
    fn obp_never_admits_past_the_limit() {
        let obp = ObpAdmission::new(0.10, 0.08, 1);
        let mut now = Instant::now();
        let mut worst: f64 = 0.0;
        for _ in 0..3 * BUCKETS {
            for _ in 0..1000 {
                obp.note_at(0, TierEvent::Lookup, now);
                if obp.admit(0) {
                    obp.note_at(0, TierEvent::Insert, now);
                    obp.note_at(0, TierEvent::Delete, now);
                }
                let (lookups, changes) = obp.lanes[0].window.current();
                if lookups >= 1000 {
                    worst = worst.max(ratio(lookups, changes));
                }
            }
            now += BUCKET;
            obp.roll_at(0, now);
        }
        let measured = obp.measured();
        assert!(worst <= 0.10 && measured.obp_max <= 0.10, "{worst} {measured:?}");
        assert_eq!(measured.windows_over, 0, "{measured:?}");
        assert!(measured.obp > 0.085, "it admits up to the band's middle: {measured:?}");
    }
}
