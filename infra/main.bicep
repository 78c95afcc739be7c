// dagq on Azure: one resource-group deployment for the whole system.
//
//   az deployment group create -g <rg> -f infra/main.bicep -p infra/main.parameters.json
//
// Identity-based and least-privilege: no storage keys, SAS or Service Bus keys exist in
// settings or outputs; each managed identity gets data-plane roles on the resources it uses.
// docs/deploy.md lists every resource and role assignment and why it exists.
targetScope = 'resourceGroup'

@description('Short name used in resource names (lowercase letters, digits, hyphens).')
@minLength(3)
@maxLength(12)
param baseName string = 'dagq'

@description('Azure region of every resource (one that offers the Flex Consumption plan).')
param location string = resourceGroup().location

@description('Store prefix p in DAGQ_STORE=azure://<account>/<p>: lowercase letters, digits, hyphens; starts with a letter.')
@minLength(3)
@maxLength(24)
param storePrefix string = 'dagq'

@description('Put task and completion queues on Service Bus (true) or on Storage queues (false).')
param useServiceBus bool = true

// Bicep has no pattern decorator (Azure/bicep#9229): the lengths are bounded here and dagq
// checks the characters (dagq.core.rules.queue_problem; tests/infra checks shipped values).
@description('Hardware classes (queue names of task definitions): 1-36 lowercase letters, digits and single hyphens each; each gets a task queue {p}-q-{class}.')
@minLength(1)
param hardwareClasses array = [
  'default'
  'cpu'
  'gpu'
]

@description('Deliveries of a message before it is dead-lettered.')
@minValue(1)
@maxValue(100)
param maxDeliveryCount int = 10

@description('Service Bus lock duration and dagq visibility timeout, in seconds.')
@minValue(5)
@maxValue(300)
param lockDurationSeconds int = 60

@description('Service Bus duplicate-detection window (ISO 8601 duration).')
param duplicateDetectionWindow string = 'PT10M'

@description('Service Bus tier.')
@allowed([
  'Standard'
  'Premium'
])
param serviceBusSku string = 'Standard'

@description('Storage replication.')
@allowed([
  'Standard_LRS'
  'Standard_ZRS'
  'Standard_GRS'
  'Standard_GZRS'
])
param storageSku string = 'Standard_ZRS'

@description('Days deleted blobs and containers stay recoverable.')
@minValue(1)
@maxValue(365)
param deleteRetentionDays int = 7

// Flex Consumption limit on on-demand instances, per function scale group: the HTTP
// functions share one group, the coordinator trigger and the repair timer each scale on
// their own, and always-ready instances are not counted.
//   Range: "Currently the lowest maximum instance count value is 1, and the highest
//   supported maximum instance count value is 1000" and "applies to on-demand instances in
//   each per-function scale group":
//   https://learn.microsoft.com/azure/azure-functions/event-driven-scaling#limit-scale-out
//   REST API: "The maximum number of on demand instances per function group"
//   (https://github.com/Azure/azure-rest-api-specs/pull/45083).
//   Default 40: the value every region accepts. It was the documented lowest value until
//   values below 40 were enabled region by region
//   (https://github.com/Azure/azure-functions-host/issues/10523), and pages still differ
//   (https://learn.microsoft.com/azure/azure-functions/flex-consumption-plan#considerations),
//   so lower values are allowed here but not the default. docs/deploy.md explains what
//   the cap means for dagq.
@description('On-demand instances per Flex Consumption scale group (1-1000; below 40 only where the region accepts it). Caps the coordinator, the HTTP API and the timer separately.')
@minValue(1)
@maxValue(1000)
param maximumInstanceCount int = 40

@description('Memory of each Function App instance in MB.')
@allowed([
  512
  2048
  4096
])
param instanceMemoryMB int = 2048

@description('Concurrent HTTP requests per Function App instance.')
@minValue(1)
@maxValue(1000)
param httpPerInstanceConcurrency int = 16

@description('Days Log Analytics keeps logs.')
@minValue(30)
@maxValue(730)
param logRetentionDays int = 30

@description('OIDC issuer URL of the AKS cluster running workers (az aks show --query oidcIssuerProfile.issuerUrl); empty for none.')
param aksOidcIssuerUrl string = ''

@description('Kubernetes namespace of the worker service account.')
param aksNamespace string = 'dagq'

@description('Kubernetes service account of the worker pods.')
param aksServiceAccount string = 'dagq-worker'

@description('Tags applied to every resource.')
param tags object = {
  application: 'dagq'
}

var suffix = uniqueString(subscription().id, resourceGroup().id, baseName)
var compactName = replace(toLower(baseName), '-', '')
var storageAccountName = take('st${compactName}${suffix}', 24)
var serviceBusNamespaceName = 'sb-${baseName}-${suffix}'
var functionAppName = 'func-${baseName}-${suffix}'
var planName = 'plan-${baseName}-${suffix}'
var workspaceName = 'log-${baseName}-${suffix}'
var appInsightsName = 'appi-${baseName}-${suffix}'
var packageContainerName = '${storePrefix}-package'

// Built-in role definition ids, as listed in
// https://learn.microsoft.com/azure/role-based-access-control/built-in-roles (the same in
// every cloud; tests/infra pins each one by its role name). Data-plane roles only: no
// Owner, Contributor or Storage Account Contributor (a management role that can read
// account keys). Service Bus Data Owner is granted on one queue only (see below).
var roles = {
  storageBlobDataOwner: 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b'
  storageBlobDataContributor: 'ba92f5b4-2d11-453d-a403-e96b0029c9fe'
  storageQueueDataContributor: '974c5e8b-45b9-4653-ba55-5f855dd0fb88'
  storageTableDataContributor: '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3'
  serviceBusDataSender: '69a216fc-b8fb-44d8-bc22-1f3c2cd27a39'
  serviceBusDataReceiver: '4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0'
  serviceBusDataOwner: '090c5cfd-751d-490a-894a-3ce6f1109419'
  monitoringMetricsPublisher: '3913510d-42f4-4e42-8a64-420c390055eb'
}

module identities 'modules/identities.bicep' = {
  name: 'dagq-identities'
  params: {
    location: location
    functionIdentityName: 'id-${baseName}-func'
    workerIdentityName: 'id-${baseName}-worker'
    aksOidcIssuerUrl: aksOidcIssuerUrl
    aksNamespace: aksNamespace
    aksServiceAccount: aksServiceAccount
    tags: tags
  }
}

module monitoring 'modules/monitoring.bicep' = {
  name: 'dagq-monitoring'
  params: {
    location: location
    workspaceName: workspaceName
    appInsightsName: appInsightsName
    retentionDays: logRetentionDays
    tags: tags
  }
}

module storage 'modules/storage.bicep' = {
  name: 'dagq-storage'
  params: {
    name: storageAccountName
    location: location
    storePrefix: storePrefix
    useServiceBus: useServiceBus
    hardwareClasses: hardwareClasses
    skuName: storageSku
    deleteRetentionDays: deleteRetentionDays
    packageContainerName: packageContainerName
    tags: tags
  }
}

module serviceBus 'modules/servicebus.bicep' = if (useServiceBus) {
  name: 'dagq-servicebus'
  params: {
    name: serviceBusNamespaceName
    location: location
    storePrefix: storePrefix
    hardwareClasses: hardwareClasses
    maxDeliveryCount: maxDeliveryCount
    lockDurationSeconds: lockDurationSeconds
    duplicateDetectionWindow: duplicateDetectionWindow
    sku: serviceBusSku
    tags: tags
  }
}

// Function App identity: host storage (Blob Data Owner is the documented minimum for
// AzureWebJobsStorage), dagq state/outputs, index/records tables, Storage queues.
module functionStorageRoles 'modules/role-assignments.bicep' = {
  name: 'dagq-roles-func-storage'
  params: {
    scopeKind: 'storage'
    scopeName: storage.outputs.STORAGE_ACCOUNT_NAME
    principalId: identities.outputs.FUNCTION_IDENTITY_PRINCIPAL_ID
    roleDefinitionIds: [
      roles.storageBlobDataOwner
      roles.storageQueueDataContributor
      roles.storageTableDataContributor
    ]
  }
}

// Function App identity: the coordinator receives completions and sends task messages.
module functionServiceBusRoles 'modules/role-assignments.bicep' = if (useServiceBus) {
  name: 'dagq-roles-func-servicebus'
  params: {
    scopeKind: 'servicebus'
    scopeName: serviceBusNamespaceName
    principalId: identities.outputs.FUNCTION_IDENTITY_PRINCIPAL_ID
    roleDefinitionIds: [
      roles.serviceBusDataSender
      roles.serviceBusDataReceiver
    ]
  }
  dependsOn: [
    serviceBus
  ]
}

// Function App identity: Manage rights on the completion queue only, so the scale
// controller can read the queue's message count. Target-based scaling for Service Bus
// needs them ("use Manage rights on resources for the most efficient scaling. With Listen
// rights, scaling reverts to incremental scale",
// https://learn.microsoft.com/azure/azure-functions/functions-target-based-scaling#service-bus-queues-and-topics):
// the extension reads the count with GetQueueRuntimePropertiesAsync and falls back when
// that is refused (ServiceBusMetricsProvider.cs in Azure/azure-sdk-for-net,
// sdk/servicebus/Microsoft.Azure.WebJobs.Extensions.ServiceBus/src/Listeners). With RBAC
// that right is Azure Service Bus Data Owner, granted here at queue scope, the narrowest
// Service Bus offers; it gives no rights on the task queues or the namespace.
module functionServiceBusScaleRoles 'modules/role-assignments.bicep' = if (useServiceBus) {
  name: 'dagq-roles-func-servicebus-scale'
  params: {
    scopeKind: 'servicebusqueue'
    scopeName: serviceBusNamespaceName
    queueName: '${storePrefix}-completions'
    principalId: identities.outputs.FUNCTION_IDENTITY_PRINCIPAL_ID
    roleDefinitionIds: [
      roles.serviceBusDataOwner
    ]
  }
  dependsOn: [
    serviceBus
  ]
}

// Function App identity: telemetry with Entra ID authentication (local auth is off).
module functionMonitoringRoles 'modules/role-assignments.bicep' = {
  name: 'dagq-roles-func-monitoring'
  params: {
    scopeKind: 'appinsights'
    scopeName: monitoring.outputs.APP_INSIGHTS_NAME
    principalId: identities.outputs.FUNCTION_IDENTITY_PRINCIPAL_ID
    roleDefinitionIds: [
      roles.monitoringMetricsPublisher
    ]
  }
}

// Worker identity: read inputs and state, write outputs and files, heartbeat records,
// receive task messages and send completions.
module workerStorageRoles 'modules/role-assignments.bicep' = {
  name: 'dagq-roles-worker-storage'
  params: {
    scopeKind: 'storage'
    scopeName: storage.outputs.STORAGE_ACCOUNT_NAME
    principalId: identities.outputs.WORKER_IDENTITY_PRINCIPAL_ID
    roleDefinitionIds: [
      roles.storageBlobDataContributor
      roles.storageQueueDataContributor
      roles.storageTableDataContributor
    ]
  }
}

module workerServiceBusRoles 'modules/role-assignments.bicep' = if (useServiceBus) {
  name: 'dagq-roles-worker-servicebus'
  params: {
    scopeKind: 'servicebus'
    scopeName: serviceBusNamespaceName
    principalId: identities.outputs.WORKER_IDENTITY_PRINCIPAL_ID
    roleDefinitionIds: [
      roles.serviceBusDataSender
      roles.serviceBusDataReceiver
    ]
  }
  dependsOn: [
    serviceBus
  ]
}

module functionApp 'modules/functionapp.bicep' = {
  name: 'dagq-functionapp'
  params: {
    name: functionAppName
    planName: planName
    location: location
    identityId: identities.outputs.FUNCTION_IDENTITY_ID
    identityClientId: identities.outputs.FUNCTION_IDENTITY_CLIENT_ID
    storageAccountName: storage.outputs.STORAGE_ACCOUNT_NAME
    blobEndpoint: storage.outputs.BLOB_ENDPOINT
    queueEndpoint: storage.outputs.QUEUE_ENDPOINT
    tableEndpoint: storage.outputs.TABLE_ENDPOINT
    packageContainerName: packageContainerName
    storePrefix: storePrefix
    useServiceBus: useServiceBus
    serviceBusNamespaceName: useServiceBus ? serviceBusNamespaceName : ''
    serviceBusFullyQualifiedNamespace: useServiceBus ? serviceBus.outputs.FULLY_QUALIFIED_NAMESPACE : ''
    appInsightsName: monitoring.outputs.APP_INSIGHTS_NAME
    maxDeliveryCount: maxDeliveryCount
    lockDurationSeconds: lockDurationSeconds
    maximumInstanceCount: maximumInstanceCount
    instanceMemoryMB: instanceMemoryMB
    httpPerInstanceConcurrency: httpPerInstanceConcurrency
    tags: tags
  }
  // The host reads its storage and queues with these roles from its first start.
  dependsOn: [
    functionStorageRoles
    functionServiceBusRoles
    functionServiceBusScaleRoles
    functionMonitoringRoles
  ]
}

output DAGQ_STORE string = 'azure://${storage.outputs.STORAGE_ACCOUNT_NAME}/${storePrefix}'
output DAGQ_QUEUES string = useServiceBus ? 'sb://${serviceBusNamespaceName}' : ''
output DAGQ_COORDINATOR_TRIGGER string = useServiceBus ? 'servicebus' : 'storage_queue'
output STORAGE_ACCOUNT_NAME string = storage.outputs.STORAGE_ACCOUNT_NAME
output STORAGE_BLOB_ENDPOINT string = storage.outputs.BLOB_ENDPOINT
output STORAGE_QUEUE_ENDPOINT string = storage.outputs.QUEUE_ENDPOINT
output STORAGE_TABLE_ENDPOINT string = storage.outputs.TABLE_ENDPOINT
output SERVICEBUS_NAMESPACE string = useServiceBus ? serviceBusNamespaceName : ''
output SERVICEBUS_FULLY_QUALIFIED_NAMESPACE string = useServiceBus ? serviceBus.outputs.FULLY_QUALIFIED_NAMESPACE : ''
output FUNCTION_APP_NAME string = functionApp.outputs.FUNCTION_APP_NAME
output FUNCTION_APP_URL string = 'https://${functionApp.outputs.FUNCTION_APP_HOSTNAME}'
output FUNCTION_APP_API_URL string = 'https://${functionApp.outputs.FUNCTION_APP_HOSTNAME}/api'
output FUNCTION_IDENTITY_CLIENT_ID string = identities.outputs.FUNCTION_IDENTITY_CLIENT_ID
output WORKER_IDENTITY_NAME string = identities.outputs.WORKER_IDENTITY_NAME
output WORKER_IDENTITY_ID string = identities.outputs.WORKER_IDENTITY_ID
output WORKER_IDENTITY_CLIENT_ID string = identities.outputs.WORKER_IDENTITY_CLIENT_ID
output WORKER_IDENTITY_PRINCIPAL_ID string = identities.outputs.WORKER_IDENTITY_PRINCIPAL_ID
output AZURE_TENANT_ID string = tenant().tenantId
output APPLICATION_INSIGHTS_NAME string = monitoring.outputs.APP_INSIGHTS_NAME
output LOG_ANALYTICS_WORKSPACE_ID string = monitoring.outputs.WORKSPACE_ID
