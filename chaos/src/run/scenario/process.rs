//! Process faults: eosmirror killed, frozen as a zombie, its state lost, a
//! second instance joining and leaving, a broker killed; each run to its
//! heal.

use std::fs;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};

use super::kinds::FaultKind;
use super::state::Run;
use crate::run::mirror::{Mirror, LANES_ASSIGNED, LANES_TAKEN};
use crate::run::rng::Rng;

/// A check that runs after a fault's heal (e.g. the thawed zombie's exit).
pub(super) type AfterHeal<'a> = Box<dyn FnOnce(&mut Run<'a>) + 'a>;

impl<'a> Run<'a> {
    /// Runs a process fault to its heal. Checks that must wait until after
    /// the heal (e.g. the thawed zombie's exit) go into `after`.
    pub(super) fn process_fault(
        &mut self,
        kind: FaultKind,
        detail: &mut Vec<String>,
        after: &mut Vec<AfterHeal<'a>>,
    ) -> Result<()> {
        match kind {
            FaultKind::KillMirror => {
                let at = Duration::from_millis(self.rng.range(0, 1500));
                let down = Duration::from_millis(self.rng.range(0, 2000));
                self.sleep(at);
                if let Some(m) = self.mirror.as_mut() {
                    m.kill();
                }
                std::thread::sleep(down);
                self.start_mirror()?;
                detail.push(format!(
                    "SIGKILL after {:.1}s, down {:.1}s",
                    at.as_secs_f64(),
                    down.as_secs_f64()
                ));
            }
            FaultKind::StateLoss => {
                let graceful = self.rng.chance(30);
                let delete = self.rng.chance(50);
                let at = Duration::from_millis(self.rng.range(0, 1500));
                self.sleep(at);
                if let Some(m) = self.mirror.as_mut() {
                    if graceful {
                        m.stop(Duration::from_secs(60));
                    } else {
                        m.kill();
                    }
                }
                let state = self.spec.state_dir.clone();
                if delete {
                    let _ = fs::remove_dir_all(&state);
                } else {
                    // Its own generator: the garbage's length depends on
                    // the files, and must not shift the schedule.
                    corrupt(&state, &mut Rng::new(self.rng.next()))?;
                }
                self.start_mirror()?;
                detail.push(format!(
                    "{} then state dir {}",
                    if graceful { "SIGTERM" } else { "SIGKILL" },
                    if delete { "deleted" } else { "corrupted" }
                ));
            }
            FaultKind::Zombie => {
                let hold = Duration::from_millis(
                    self.cfg.transaction_timeout_ms + self.rng.range(2000, 6000),
                );
                let mut zombie = self
                    .mirror
                    .take()
                    .ok_or_else(|| anyhow!("no eosmirror to freeze"))?;
                zombie.signal(libc::SIGSTOP);
                // The new instance: same alias and transactional ids, its
                // own state dir.
                self.spec.state_dir = self.dir.join(format!("state-{}", self.started_mirrors));
                self.start_mirror()?;
                self.sleep(hold);
                let before_thaw = zombie.output().len();
                zombie.signal(libc::SIGCONT);
                detail.push(format!(
                    "SIGSTOP {:.1}s, second instance took over",
                    hold.as_secs_f64()
                ));
                after.push(Box::new(move |run: &mut Run<'a>| {
                    // The fleet's group tells the thawed instance that its
                    // lanes moved; it rejoins and takes a share, then leaves
                    // on SIGTERM and hands them back.
                    let deadline = Instant::now() + Duration::from_secs(90);
                    let rejoined = loop {
                        let out = zombie.output();
                        let since = out.get(before_thaw..).unwrap_or_default();
                        if since.contains(LANES_TAKEN) && since.contains(LANES_ASSIGNED) {
                            break true;
                        }
                        if Instant::now() > deadline || !zombie.is_running() {
                            break false;
                        }
                        std::thread::sleep(Duration::from_millis(250));
                    };
                    if !rejoined {
                        zombie.kill();
                        run.deviations.push(format!(
                            "the thawed zombie did not learn within 90 s that its lanes moved and rejoin the fleet; last lines:\n{}",
                            zombie.tail(15)
                        ));
                        return;
                    }
                    match zombie.stop(Duration::from_secs(90)) {
                        Some(0) => run.outcomes.push(
                            "thawed zombie fenced: its lanes moved, it rejoined the fleet and left cleanly on SIGTERM".into(),
                        ),
                        other => run.deviations.push(format!(
                            "the thawed zombie rejoined but did not leave cleanly on SIGTERM ({other:?}); last lines:\n{}",
                            zombie.tail(15)
                        )),
                    }
                }));
            }
            FaultKind::InstanceKill | FaultKind::ScaleOutIn => {
                let mut second = self.start_second(&[])?;
                let joined_by = Instant::now() + Duration::from_secs(60);
                while !second.output().contains(LANES_ASSIGNED)
                    && second.is_running()
                    && Instant::now() < joined_by
                {
                    self.sleep(Duration::from_millis(250));
                }
                if !second.output().contains(LANES_ASSIGNED) {
                    self.deviations.push(format!(
                        "the second instance was not assigned lanes within 60 s; last lines:\n{}",
                        second.tail(15)
                    ));
                }
                let hold = Duration::from_millis(self.rng.range(2000, 8000));
                self.sleep(hold);
                if kind == FaultKind::InstanceKill {
                    second.kill();
                    detail.push(format!(
                        "second instance joined, SIGKILL after {:.1}s",
                        hold.as_secs_f64()
                    ));
                } else {
                    match second.stop(Duration::from_secs(90)) {
                        Some(0) => self.outcomes.push(
                            "a second instance took a share of the lanes and left cleanly on SIGTERM".into(),
                        ),
                        other => self.deviations.push(format!(
                            "the second instance did not leave cleanly on SIGTERM ({other:?}); last lines:\n{}",
                            second.tail(15)
                        )),
                    }
                    detail.push(format!(
                        "second instance joined, SIGTERM after {:.1}s",
                        hold.as_secs_f64()
                    ));
                }
            }
            FaultKind::LaneCountChange => self.lane_count_change(detail)?,
            FaultKind::TargetBrokerKill | FaultKind::SourceBrokerKill => {
                let name = if kind == FaultKind::TargetBrokerKill {
                    "target"
                } else {
                    "source"
                };
                let brokers = self.cfg.brokers.clone().expect("checked by unavailable()");
                let down = Duration::from_millis(self.rng.range(1000, 5000));
                let pid = brokers.kill(name)?;
                self.say(&format!("{name} broker (pid {pid}) killed"));
                self.sleep(down);
                let started = Instant::now();
                let log = self
                    .dir
                    .join(format!("cluster-up-{}.log", self.faults.len()));
                brokers.up(
                    &log,
                    &[&self.cfg.source.bootstrap, &self.cfg.target.bootstrap],
                )?;
                detail.push(format!(
                    "{name} broker SIGKILL, down {:.1}s + {:.1}s restart",
                    down.as_secs_f64(),
                    started.elapsed().as_secs_f64()
                ));
            }
            FaultKind::SourceGap => self.source_gap(detail)?,
            _ => unreachable!("network and scripted faults are not process faults"),
        }
        Ok(())
    }
}

impl Run<'_> {
    /// Starts a second instance of the deployment, with its own state dir,
    /// and `more` arguments after the run's own.
    fn start_second(&mut self, more: &[&str]) -> Result<Mirror> {
        let mut spec = self.spec.clone();
        spec.state_dir = self.dir.join(format!("state-{}", self.started_mirrors));
        let mut extra: Vec<&str> = self.extra.iter().map(String::as_str).collect();
        extra.extend_from_slice(more);
        let second = spec.start(self.started_mirrors, &extra)?;
        self.started_mirrors += 1;
        Ok(second)
    }

    /// Starts a second instance of the deployment with one lane more than
    /// it has (the partition count of its progress topic) and expects the
    /// refusal.
    fn lane_count_change(&mut self, detail: &mut Vec<String>) -> Result<()> {
        // The first instance creates it at start, which may be just now.
        let progress = format!("__eosmirror.progress.{}", self.spec.alias);
        let created_by = Instant::now() + Duration::from_secs(60);
        let lanes = loop {
            match self.cfg.target.partitions(&progress)? {
                Some(lanes) => break lanes,
                None if Instant::now() < created_by => self.sleep(Duration::from_millis(250)),
                None => bail!("the deployment's topic {progress} did not appear within 60 s"),
            }
        };
        let other = (lanes + 1).to_string();
        let mut second = self.start_second(&["--lanes", &other])?;
        let code = second.wait_exit(Duration::from_secs(60));
        let named = second
            .output()
            .contains(&format!("Run with --lanes {lanes}"));
        match code {
            Some(code) if code != 0 && named => self.outcomes.push(format!(
                "an instance started with --lanes {other} was refused, naming --lanes {lanes}"
            )),
            _ => {
                second.kill();
                self.deviations.push(format!(
                    "an instance started with --lanes {other} while the deployment has {lanes} lanes was not refused naming --lanes {lanes} (exit {code:?}); last lines:\n{}",
                    second.tail(15)
                ));
            }
        }
        detail.push(format!(
            "second instance with --lanes {other}: exit {code:?}"
        ));
        Ok(())
    }
}

/// Overwrites every file of a state dir with seeded garbage.
fn corrupt(dir: &std::path::Path, rng: &mut Rng) -> Result<()> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Ok(());
    };
    for e in entries.flatten() {
        let path = e.path();
        if path.is_file() {
            let len = fs::metadata(&path)?.len().clamp(64, 4096) as usize;
            let garbage: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            fs::write(&path, garbage)?;
        } else if path.is_dir() {
            corrupt(&path, rng)?;
        }
    }
    Ok(())
}
