"""The ZooKeeper-era high-level consumer (Kafka 0.8's ZookeeperConsumerConnector), for teaching
why the group coordinator was invented: its assignors over thread ids, its configuration, its pure
rebalance machine and the driver that runs it over a registry (docs/legacy.md)."""
