//! What makes a CPU noisy for a pinned send thread, and one verdict: `quiet` or
//! `not quiet: <reasons>`.
//!
//! Shared by the `ergon-cpucheck` program and by `limit_bench`, so both print the same
//! verdict for the same CPU. Everything is read from `/sys` and `/proc` under a root
//! the caller chooses ([`Paths`]), so tests can point it at a directory they made.
//!
//! A file that is missing or unreadable (a container, another architecture) makes its
//! item [`Status::Unknown`]; it never panics and never guesses. A CPU is called quiet
//! only on positive evidence for every item: an unknown item is a reason too.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where `/sys` and `/proc` are.
#[derive(Clone, Debug)]
pub struct Paths {
    /// The sysfs root, normally `/sys`.
    pub sys: PathBuf,
    /// The procfs root, normally `/proc`.
    pub proc: PathBuf,
}

impl Default for Paths {
    fn default() -> Self {
        Paths {
            sys: PathBuf::from("/sys"),
            proc: PathBuf::from("/proc"),
        }
    }
}

impl Paths {
    fn cpu_dir(&self) -> PathBuf {
        self.sys.join("devices/system/cpu")
    }
}

/// The outcome of one item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Nothing on this item disturbs the CPU.
    Ok,
    /// This item disturbs the CPU; the text is the reason as it appears in the verdict.
    Noisy(String),
    /// This item could not be read; the text says what was missing.
    Unknown(String),
}

/// One line of the report: an item, what was found, and whether it is quiet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// Short name of the item ("isolcpus", "irqs" ...), also used in reasons.
    pub item: &'static str,
    /// What was found, for a person.
    pub detail: String,
    /// Quiet, noisy or unknown.
    pub status: Status,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mark = match self.status {
            Status::Ok => "ok",
            Status::Noisy(_) => "NOISY",
            Status::Unknown(_) => "unknown",
        };
        write!(f, "{:<18} {:<8} {}", self.item, mark, self.detail)
    }
}

/// The verdict line: `quiet` when every finding is [`Status::Ok`], otherwise
/// `not quiet: ` followed by the reasons, separated by `; `.
pub fn verdict(findings: &[Finding]) -> String {
    let reasons: Vec<String> = findings
        .iter()
        .filter_map(|f| match &f.status {
            Status::Ok => None,
            Status::Noisy(r) => Some(r.clone()),
            Status::Unknown(what) => Some(format!("{} unknown ({what})", f.item)),
        })
        .collect();
    if reasons.is_empty() {
        "quiet".to_string()
    } else {
        format!("not quiet: {}", reasons.join("; "))
    }
}

/// A malformed CPU list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadCpuList(pub String);

impl fmt::Display for BadCpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad cpu list {:?}", self.0)
    }
}

/// Parses a kernel CPU list (`"0-3,8,10-11"`; empty means none). Also accepts the
/// `nohz_full=`/`isolcpus=` flag prefixes (`"domain,managed_irq,2-3"`), skipping words.
pub fn parse_cpu_list(text: &str) -> Result<Vec<usize>, BadCpuList> {
    let bad = || BadCpuList(text.to_string());
    let mut cpus = Vec::new();
    for piece in text.trim().split(',').map(str::trim) {
        // "(null)" is how some kernels print an empty nohz_full.
        if piece.is_empty()
            || piece == "(null)"
            || piece.chars().all(|c| c.is_ascii_alphabetic() || c == '_')
        {
            continue;
        }
        // "0-7:2/4" (group syntax) is rare; take only plain ranges and say so otherwise.
        let (lo, hi) = match piece.split_once('-') {
            Some((a, b)) => (a.parse::<usize>(), b.parse::<usize>()),
            None => (piece.parse::<usize>(), piece.parse::<usize>()),
        };
        let (lo, hi) = (lo.map_err(|_| bad())?, hi.map_err(|_| bad())?);
        if lo > hi || hi > 1 << 16 {
            return Err(bad());
        }
        cpus.extend(lo..=hi);
    }
    Ok(cpus)
}

fn read(path: &Path) -> Result<String, String> {
    fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn read_list(path: &Path) -> Result<Vec<usize>, String> {
    let text = read(path)?;
    parse_cpu_list(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Isolation of one CPU as the kernel reports it; `None` where it could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Isolation {
    /// In `/sys/devices/system/cpu/isolated` (isolcpus).
    pub isolated: Option<bool>,
    /// In `/sys/devices/system/cpu/nohz_full`.
    pub nohz_full: Option<bool>,
}

/// Reads isolcpus and nohz_full for `cpu`.
pub fn isolation(paths: &Paths, cpu: usize) -> Isolation {
    let dir = paths.cpu_dir();
    let has = |name: &str| {
        read_list(&dir.join(name))
            .ok()
            .map(|cpus| cpus.contains(&cpu))
    };
    Isolation {
        isolated: has("isolated"),
        nohz_full: has("nohz_full"),
    }
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// isolcpus: the scheduler puts nothing on the CPU unless pinned there.
pub fn check_isolcpus(paths: &Paths, cpu: usize) -> Finding {
    list_finding(
        paths.cpu_dir().join("isolated"),
        cpu,
        "isolcpus",
        "not in isolcpus",
    )
}

/// nohz_full: no scheduler tick while one task runs.
pub fn check_nohz_full(paths: &Paths, cpu: usize) -> Finding {
    list_finding(
        paths.cpu_dir().join("nohz_full"),
        cpu,
        "nohz_full",
        "not nohz_full",
    )
}

fn list_finding(path: PathBuf, cpu: usize, item: &'static str, reason: &str) -> Finding {
    match read_list(&path) {
        Ok(cpus) => {
            let inside = cpus.contains(&cpu);
            Finding {
                item,
                detail: format!(
                    "cpu {cpu} {}in {} {:?}",
                    if inside { "" } else { "not " },
                    path.display(),
                    compact(&cpus)
                ),
                status: if inside {
                    Status::Ok
                } else {
                    Status::Noisy(reason.to_string())
                },
            }
        }
        Err(e) => Finding {
            item,
            detail: e.clone(),
            status: Status::Unknown(format!("cannot read {}", path.display())),
        },
    }
}

fn compact(cpus: &[usize]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        if !out.is_empty() {
            out.push(',');
        }
        if j > i {
            out.push_str(&format!("{}-{}", cpus[i], cpus[j]));
        } else {
            out.push_str(&cpus[i].to_string());
        }
        i = j + 1;
    }
    out
}

/// rcu_nocbs: RCU callbacks run elsewhere. Only the kernel command line says so.
pub fn check_rcu_nocbs(paths: &Paths, cpu: usize) -> Finding {
    let item = "rcu_nocbs";
    let path = paths.proc.join("cmdline");
    let cmdline = match read(&path) {
        Ok(c) => c,
        Err(e) => {
            return Finding {
                item,
                detail: e,
                status: Status::Unknown(format!("cannot read {}", path.display())),
            }
        }
    };
    let arg = cmdline
        .split_whitespace()
        .find_map(|w| w.strip_prefix("rcu_nocbs="));
    match arg.map(parse_cpu_list) {
        None => Finding {
            item,
            detail: "no rcu_nocbs= on the kernel command line".to_string(),
            status: Status::Noisy("not rcu_nocbs".to_string()),
        },
        Some(Err(e)) => Finding {
            item,
            detail: e.to_string(),
            status: Status::Unknown(e.to_string()),
        },
        Some(Ok(cpus)) if cpus.contains(&cpu) => Finding {
            item,
            detail: format!("cpu {cpu} in rcu_nocbs={}", compact(&cpus)),
            status: Status::Ok,
        },
        Some(Ok(cpus)) => Finding {
            item,
            detail: format!("cpu {cpu} not in rcu_nocbs={}", compact(&cpus)),
            status: Status::Noisy("not rcu_nocbs".to_string()),
        },
    }
}

/// IRQs whose affinity (effective affinity where the kernel has it) includes the CPU.
pub fn check_irqs(paths: &Paths, cpu: usize) -> Finding {
    let item = "irqs";
    let dir = paths.proc.join("irq");
    let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) => {
            return Finding {
                item,
                detail: format!("{}: {e}", dir.display()),
                status: Status::Unknown(format!("cannot read {}", dir.display())),
            }
        }
    };
    let names = irq_names(paths);
    let mut hits: Vec<(u32, String)> = Vec::new();
    let mut unreadable = 0usize;
    for entry in entries.flatten() {
        let Some(irq) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let effective = entry.path().join("effective_affinity_list");
        let list =
            read_list(&effective).or_else(|_| read_list(&entry.path().join("smp_affinity_list")));
        match list {
            Ok(cpus) if cpus.contains(&cpu) => {
                let name = names
                    .iter()
                    .find(|(n, _)| *n == irq)
                    .map_or(String::new(), |(_, s)| s.clone());
                hits.push((irq, name));
            }
            Ok(_) => {}
            Err(_) => unreadable += 1,
        }
    }
    hits.sort();
    let listed: Vec<String> = hits
        .iter()
        .map(|(n, name)| {
            if name.is_empty() {
                n.to_string()
            } else {
                format!("{n} ({name})")
            }
        })
        .collect();
    let mut detail = if hits.is_empty() {
        format!("no IRQ may land on cpu {cpu}")
    } else {
        format!(
            "{} may land on cpu {cpu}: {}",
            hits.len(),
            listed.join(", ")
        )
    };
    if unreadable > 0 {
        detail.push_str(&format!(" ({unreadable} IRQ affinities unreadable)"));
    }
    let status = if !hits.is_empty() {
        Status::Noisy(format!("{} IRQs may land on cpu {cpu}", hits.len()))
    } else if unreadable > 0 {
        Status::Unknown(format!("{unreadable} IRQ affinities unreadable"))
    } else {
        Status::Ok
    };
    Finding {
        item,
        detail,
        status,
    }
}

/// IRQ numbers and their device names from `/proc/interrupts` (empty if unreadable:
/// names are decoration).
fn irq_names(paths: &Paths) -> Vec<(u32, String)> {
    let Ok(text) = read(&paths.proc.join("interrupts")) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let (num, rest) = line.trim_start().split_once(':')?;
            let num = num.parse::<u32>().ok()?;
            let name = rest
                .split_whitespace()
                .rfind(|w| w.parse::<u64>().is_err())
                .unwrap_or("")
                .to_string();
            Some((num, name))
        })
        .collect()
}

/// The cpufreq governor: anything but `performance` lets the clock change under us.
pub fn check_governor(paths: &Paths, cpu: usize) -> Finding {
    let item = "cpufreq governor";
    let path = paths
        .cpu_dir()
        .join(format!("cpu{cpu}/cpufreq/scaling_governor"));
    match read(&path) {
        Ok(g) => {
            let g = g.trim().to_string();
            Finding {
                item,
                detail: g.clone(),
                status: if g == "performance" {
                    Status::Ok
                } else {
                    Status::Noisy(format!("cpufreq governor {g}"))
                },
            }
        }
        Err(e) => Finding {
            item,
            detail: e,
            status: Status::Unknown("no cpufreq".to_string()),
        },
    }
}

/// SMT siblings: a sibling that is not isolated shares the core with whatever runs
/// there.
pub fn check_smt(paths: &Paths, cpu: usize) -> Finding {
    let item = "smt siblings";
    let path = paths
        .cpu_dir()
        .join(format!("cpu{cpu}/topology/thread_siblings_list"));
    let siblings = match read_list(&path) {
        Ok(s) => s,
        Err(e) => {
            return Finding {
                item,
                detail: e,
                status: Status::Unknown(format!("cannot read {}", path.display())),
            }
        }
    };
    let others: Vec<usize> = siblings.into_iter().filter(|&c| c != cpu).collect();
    if others.is_empty() {
        return Finding {
            item,
            detail: "none".to_string(),
            status: Status::Ok,
        };
    }
    let isolated = read_list(&paths.cpu_dir().join("isolated")).unwrap_or_default();
    let busy: Vec<usize> = others
        .iter()
        .copied()
        .filter(|c| !isolated.contains(c))
        .collect();
    Finding {
        item,
        detail: format!(
            "cpu {} (not isolated: {})",
            compact(&others),
            if busy.is_empty() {
                "none".to_string()
            } else {
                compact(&busy)
            }
        ),
        status: if busy.is_empty() {
            Status::Ok
        } else {
            Status::Noisy(format!("SMT sibling cpu {} not isolated", compact(&busy)))
        },
    }
}

/// The clock source: only `tsc` reads the time without a trip to a slow device.
pub fn check_clocksource(paths: &Paths) -> Finding {
    let item = "clock source";
    let path = paths
        .sys
        .join("devices/system/clocksource/clocksource0/current_clocksource");
    match read(&path) {
        Ok(s) => {
            let s = s.trim().to_string();
            Finding {
                item,
                detail: s.clone(),
                status: if s == "tsc" {
                    Status::Ok
                } else {
                    Status::Noisy(format!("clock source {s}"))
                },
            }
        }
        Err(e) => Finding {
            item,
            detail: e,
            status: Status::Unknown(format!("cannot read {}", path.display())),
        },
    }
}

/// Invariant TSC: `constant_tsc` and `nonstop_tsc` in `/proc/cpuinfo` (x86 only).
pub fn check_invariant_tsc(paths: &Paths) -> Finding {
    let item = "invariant tsc";
    let path = paths.proc.join("cpuinfo");
    let text = match read(&path) {
        Ok(t) => t,
        Err(e) => {
            return Finding {
                item,
                detail: e,
                status: Status::Unknown(format!("cannot read {}", path.display())),
            }
        }
    };
    let Some(flags) = text
        .lines()
        .find(|l| l.starts_with("flags"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, f)| f.split_whitespace().collect::<Vec<_>>())
    else {
        return Finding {
            item,
            detail: "no flags line in /proc/cpuinfo".to_string(),
            status: Status::Unknown("no cpu flags".to_string()),
        };
    };
    let constant = flags.contains(&"constant_tsc");
    let nonstop = flags.contains(&"nonstop_tsc");
    Finding {
        item,
        detail: format!(
            "constant_tsc {}, nonstop_tsc {}",
            yes_no(constant),
            yes_no(nonstop)
        ),
        status: if constant && nonstop {
            Status::Ok
        } else {
            Status::Noisy("TSC not invariant".to_string())
        },
    }
}

/// Gaps seen by a thread spinning on the clock.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Hiccups {
    /// How long it spun.
    pub seconds: f64,
    /// Clock reads made.
    pub reads: u64,
    /// Longest gap between two reads, ns.
    pub max_gap_ns: u64,
    /// Gaps of at least 1 µs.
    pub ge_1us: u64,
    /// Gaps of at least 10 µs.
    pub ge_10us: u64,
    /// Gaps of at least 100 µs.
    pub ge_100us: u64,
}

impl Hiccups {
    fn per_s(&self, n: u64) -> f64 {
        if self.seconds > 0.0 {
            n as f64 / self.seconds
        } else {
            0.0
        }
    }
}

/// A gap this long means something else ran on (or interrupted) the CPU.
pub const HICCUP_NOISY_NS: u64 = 10_000;

/// Spins on the clock for `spin` on the calling thread and records the gaps. Pin the
/// thread first ([`pin`]) to measure one CPU.
pub fn measure_hiccups(spin: Duration) -> Hiccups {
    let start = Instant::now();
    let mut last = start;
    let mut h = Hiccups::default();
    loop {
        let now = Instant::now();
        let gap = now.duration_since(last).as_nanos() as u64;
        last = now;
        h.reads += 1;
        h.max_gap_ns = h.max_gap_ns.max(gap);
        h.ge_1us += u64::from(gap >= 1_000);
        h.ge_10us += u64::from(gap >= 10_000);
        h.ge_100us += u64::from(gap >= 100_000);
        // Checking the end every read is itself a read: no extra work per iteration.
        if now.duration_since(start) >= spin {
            break;
        }
    }
    h.seconds = last.duration_since(start).as_secs_f64();
    h
}

/// The hiccup item: noisy if any gap reached [`HICCUP_NOISY_NS`].
pub fn hiccup_finding(h: &Hiccups) -> Finding {
    let detail = format!(
        "{:.2} s spinning: max gap {:.1} us; gaps per second >= 1 us {:.1}, >= 10 us {:.1}, >= 100 us {:.1}",
        h.seconds,
        h.max_gap_ns as f64 / 1e3,
        h.per_s(h.ge_1us),
        h.per_s(h.ge_10us),
        h.per_s(h.ge_100us),
    );
    let status = if h.reads == 0 {
        Status::Unknown("no clock reads".to_string())
    } else if h.max_gap_ns >= HICCUP_NOISY_NS {
        Status::Noisy(format!(
            "hiccups: max gap {:.1} us, {} gaps >= 10 us",
            h.max_gap_ns as f64 / 1e3,
            h.ge_10us
        ))
    } else {
        Status::Ok
    };
    Finding {
        item: "hiccups",
        detail,
        status,
    }
}

/// Pins the calling thread to `cpu` and returns the CPU it then runs on
/// (`sched_getcpu`), which the caller compares with `cpu`.
pub fn pin(cpu: usize) -> Result<usize, String> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(format!("cpu {cpu} is beyond CPU_SETSIZE"));
    }
    // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET write inside it (cpu was
    // checked against CPU_SETSIZE) and sched_setaffinity reads it.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        return Err(format!(
            "cannot pin to cpu {cpu}: {}",
            std::io::Error::last_os_error()
        ));
    }
    current_cpu()
}

/// The CPU the calling thread runs on now (`sched_getcpu`).
pub fn current_cpu() -> Result<usize, String> {
    // SAFETY: sched_getcpu takes no arguments and only returns a number.
    let on = unsafe { libc::sched_getcpu() };
    usize::try_from(on).map_err(|_| format!("sched_getcpu: {}", std::io::Error::last_os_error()))
}

/// Every item for `cpu`, the hiccup measurement last. The calling thread is pinned to
/// `cpu` for the measurement (`spin` long); if it cannot be, the hiccup item is
/// unknown.
pub fn check(paths: &Paths, cpu: usize, spin: Duration) -> Vec<Finding> {
    let mut findings = vec![
        check_isolcpus(paths, cpu),
        check_nohz_full(paths, cpu),
        check_rcu_nocbs(paths, cpu),
        check_irqs(paths, cpu),
        check_governor(paths, cpu),
        check_smt(paths, cpu),
        check_clocksource(paths),
        check_invariant_tsc(paths),
    ];
    findings.push(match pin(cpu) {
        Ok(on) if on == cpu => hiccup_finding(&measure_hiccups(spin)),
        Ok(on) => Finding {
            item: "hiccups",
            detail: format!("pinned to cpu {cpu} but running on cpu {on}"),
            status: Status::Unknown(format!("not running on cpu {cpu}")),
        },
        Err(e) => Finding {
            item: "hiccups",
            detail: e.clone(),
            status: Status::Unknown(e),
        },
    });
    findings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(name: &str) -> Paths {
        let root =
            std::env::temp_dir().join(format!("ergon-cpucheck-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(&root).unwrap();
        Paths {
            sys: root.join("sys"),
            proc: root.join("proc"),
        }
    }

    fn put(path: PathBuf, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    #[test]
    fn cpu_lists_parse_and_reject_garbage() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11\n").unwrap(),
            vec![0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(parse_cpu_list("\n").unwrap(), Vec::<usize>::new());
        assert_eq!(
            parse_cpu_list("domain,managed_irq,2-3").unwrap(),
            vec![2, 3]
        );
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("x7").is_err());
        assert!(parse_cpu_list("0-99999999").is_err());
    }

    #[test]
    fn missing_files_are_unknown_and_never_quiet() {
        let paths = tree("missing");
        let mut findings = vec![
            check_isolcpus(&paths, 3),
            check_nohz_full(&paths, 3),
            check_rcu_nocbs(&paths, 3),
            check_irqs(&paths, 3),
            check_governor(&paths, 3),
            check_smt(&paths, 3),
            check_clocksource(&paths),
            check_invariant_tsc(&paths),
        ];
        for f in &findings {
            assert!(matches!(f.status, Status::Unknown(_)), "{f}");
        }
        findings.push(hiccup_finding(&Hiccups {
            seconds: 1.0,
            reads: 10,
            ..Hiccups::default()
        }));
        let v = verdict(&findings);
        assert!(v.starts_with("not quiet: isolcpus unknown ("), "{v}");
        assert!(v.contains("irqs unknown"), "{v}");
        assert_eq!(
            isolation(&paths, 3),
            Isolation {
                isolated: None,
                nohz_full: None
            }
        );
    }

    #[test]
    fn a_tuned_cpu_is_quiet() {
        let paths = tree("quiet");
        let cpu = paths.sys.join("devices/system/cpu");
        put(cpu.join("isolated"), "2-3\n");
        put(cpu.join("nohz_full"), "2-3\n");
        put(cpu.join("cpu3/cpufreq/scaling_governor"), "performance\n");
        put(cpu.join("cpu3/topology/thread_siblings_list"), "2-3\n");
        put(
            paths
                .sys
                .join("devices/system/clocksource/clocksource0/current_clocksource"),
            "tsc\n",
        );
        put(
            paths.proc.join("cmdline"),
            "ro isolcpus=2-3 nohz_full=2-3 rcu_nocbs=2-3\n",
        );
        put(
            paths.proc.join("cpuinfo"),
            "processor : 0\nflags : fpu tsc constant_tsc nonstop_tsc\n",
        );
        put(paths.proc.join("irq/0/smp_affinity_list"), "0\n");
        put(paths.proc.join("irq/24/smp_affinity_list"), "0-3\n");
        put(paths.proc.join("irq/24/effective_affinity_list"), "1\n");
        let mut findings = check(&paths, 3, Duration::ZERO);
        findings.pop(); // the real hiccup measurement depends on this machine
        findings.push(hiccup_finding(&Hiccups {
            seconds: 1.0,
            reads: 1000,
            max_gap_ns: 900,
            ..Hiccups::default()
        }));
        for f in &findings {
            assert_eq!(f.status, Status::Ok, "{f}");
        }
        assert_eq!(verdict(&findings), "quiet");
        assert_eq!(
            isolation(&paths, 3),
            Isolation {
                isolated: Some(true),
                nohz_full: Some(true)
            }
        );
    }

    #[test]
    fn each_noise_source_is_a_reason() {
        let paths = tree("noisy");
        let cpu = paths.sys.join("devices/system/cpu");
        put(cpu.join("isolated"), "\n");
        put(cpu.join("nohz_full"), "(null)\n");
        put(cpu.join("cpu1/cpufreq/scaling_governor"), "powersave\n");
        put(cpu.join("cpu1/topology/thread_siblings_list"), "1,5\n");
        put(
            paths
                .sys
                .join("devices/system/clocksource/clocksource0/current_clocksource"),
            "hpet\n",
        );
        put(paths.proc.join("cmdline"), "ro quiet\n");
        put(paths.proc.join("cpuinfo"), "flags : fpu tsc constant_tsc\n");
        put(paths.proc.join("irq/9/smp_affinity_list"), "0-7\n");
        put(
            paths.proc.join("interrupts"),
            "           CPU0       CPU1\n  9:          0          0   IO-APIC   9-fasteoi   acpi\n",
        );
        let mut findings: Vec<Finding> = vec![
            check_isolcpus(&paths, 1),
            check_rcu_nocbs(&paths, 1),
            check_irqs(&paths, 1),
            check_governor(&paths, 1),
            check_smt(&paths, 1),
            check_clocksource(&paths),
            check_invariant_tsc(&paths),
        ];
        findings.push(hiccup_finding(&Hiccups {
            seconds: 1.0,
            reads: 1000,
            max_gap_ns: 250_000,
            ge_1us: 3,
            ge_10us: 2,
            ge_100us: 1,
        }));
        assert_eq!(
            verdict(&findings),
            "not quiet: not in isolcpus; not rcu_nocbs; 1 IRQs may land on cpu 1; \
             cpufreq governor powersave; SMT sibling cpu 5 not isolated; clock source hpet; \
             TSC not invariant; hiccups: max gap 250.0 us, 2 gaps >= 10 us"
        );
        assert!(
            findings[2].detail.contains("9 (acpi)"),
            "{}",
            findings[2].detail
        );
        // "(null)" is what some kernels print for an empty nohz_full.
        assert_eq!(
            check_nohz_full(&paths, 1).status,
            Status::Noisy("not nohz_full".to_string())
        );
    }

    #[test]
    fn hiccups_are_measured_on_this_thread() {
        let h = measure_hiccups(Duration::from_millis(20));
        assert!(h.reads > 100, "{h:?}");
        assert!(h.seconds >= 0.02, "{h:?}");
        assert!(h.ge_100us <= h.ge_10us && h.ge_10us <= h.ge_1us);
    }
}
