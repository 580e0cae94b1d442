use clap::Parser;

use super::*;
use crate::plan::{Shape, plan};

fn args(line: &str) -> Args {
    let words = std::iter::once("xjob-bench").chain(line.split_whitespace());
    Args::try_parse_from(words).expect("valid arguments")
}

#[test]
fn w_workloads_keep_their_shapes() {
    let w1 = plan(&args("--workload w1")).expect("plan");
    assert_eq!(
        w1.shape,
        Shape {
            jobs: 100,
            period_s: 1,
            spread: false
        }
    );
    assert_eq!(
        (w1.admins, w1.executors, w1.backend),
        (1, 1, Backend::Sqlite)
    );
    assert_eq!(w1.timing.node_lease, None);
    assert_eq!(w1.shape.cron(7), "* * * * * ?");
    let w2 = plan(&args("--workload W2")).expect("plan");
    assert_eq!(w2.shape.cron(13), "3/10 * * * * ?");
    let w4 = plan(&args("--workload w4")).expect("plan");
    assert_eq!(w4.shape.cron(5), "0 * * * * ?");
}

#[test]
fn failover_defaults_make_a_thousand_fires_per_second_on_three_admins() {
    let f1 = plan(&args("--workload f1")).expect("plan");
    assert_eq!(f1.shape.fires_per_second(), 1000.0);
    assert_eq!((f1.admins, f1.executors), (3, 2));
    assert_eq!(f1.timing.node_lease, None, "F1 runs with the default lease");
    let f2 = plan(&args("--workload f2")).expect("plan");
    assert_eq!(f2.timing.node_lease, Some(Duration::from_millis(2000)));
    assert_eq!(f1.shape.cron(3), "1/2 * * * * ?");
    assert_eq!(f1.shape.phase(3), 1);
    let f3 = plan(&args("--workload f3")).expect("plan");
    assert_eq!(f3.backend, Backend::Postgres);
}

#[test]
fn impossible_combinations_are_refused() {
    assert!(plan(&args("--workload w2 --period 7")).is_err());
    assert!(plan(&args("--workload f1 --admins 1")).is_err());
    assert!(plan(&args("--workload f3 --database sqlite")).is_err());
    assert!(
        plan(&args(
            "--database mariadb --database-url postgres://u:p@h/db"
        ))
        .is_err()
    );
    let external = plan(&args("--database-url mysql://u:p@h/db")).expect("plan");
    assert_eq!(external.backend, Backend::Mariadb);
}

#[test]
fn misfired_fires_are_not_lost() {
    let figures = Figures {
        expected: 10,
        delivered: 7,
        missed: 3,
        duplicates: 0,
        off_grid: 0,
        throughput_fps: 0.0,
        lateness_p50_ms: 0,
        lateness_p99_ms: 0,
        lateness_max_ms: 0,
    };
    let failover = FailoverFigures {
        takeover_ms: Vec::new(),
        adopted_delay_ms: Vec::new(),
        misfired: 2,
        outage_ms: None,
        recovery_ms: None,
    };
    assert_eq!(lost(&figures, Some(&failover)), 1);
    assert_eq!(lost(&figures, None), 3);
}
