//! The process: health, the bus and its capabilities.

use snowpea_proto::rpc::v1::service_bus_client::ServiceBusClient;

use super::harness::*;

#[tokio::test]
async fn serves_health_and_declares_real_capabilities() {
    let svc = Svc::start().await;
    for name in [
        "snowpea.memory.v1.MemoryService",
        "snowpea.memory.v1.SiteService",
        "snowpea.rpc.v1.ServiceBus",
    ] {
        assert!(
            snowpea_common::client::is_serving(svc.socket(), name, CALL).await,
            "{name}"
        );
    }
    let mut bus = ServiceBusClient::new(svc.channel());
    let caps = call(bus.capabilities(())).await.unwrap().capabilities;
    assert_eq!(caps, vec!["siteMemory", "siteRecipes", "siteFrameActions"]);
}
