//! Every test that needs a real ZooKeeper and nothing else: servers,
//! ensembles and fault proxies started by testkit on loopback ports (after
//! `./scripts/setup.sh`), one module per topic. Tests that share a
//! server (`testkit::zk::shared()`, or a module's own) work under paths of
//! their own, named by their module and this process's id.

mod chaos;
mod client;
mod examples;
mod failover;
mod jute_live;
mod latch;
mod lock_delay;
mod lock_faults;
mod mutex;
mod observer;
mod partition;
mod recipes;
mod renewal;
mod sasl;
mod sequence_end;
mod sim_vs_real;
mod timeouts;
#[cfg(feature = "tls")]
mod tls;
