pub mod zookeeper;
