// The dagq Function App (HTTP API, coordinator, timers) on the Flex Consumption plan.
// Every connection is identity-based: the app carries one user-assigned identity and
// no setting holds a storage key, a SAS or a Service Bus key.

@description('Function App name.')
param name string

@description('Flex Consumption plan name.')
param planName string

@description('Azure region.')
param location string

@description('Resource id of the Function App user-assigned identity.')
param identityId string

@description('Client id of the Function App user-assigned identity.')
param identityClientId string

@description('Storage account holding dagq data and the Functions host storage.')
param storageAccountName string

@description('Blob endpoint of that account (https://<account>.blob.<suffix>/).')
param blobEndpoint string

@description('Queue endpoint of that account.')
param queueEndpoint string

@description('Table endpoint of that account.')
param tableEndpoint string

@description('Blob container receiving the deployment package.')
param packageContainerName string

@description('Store prefix used in DAGQ_STORE=azure://<account>/<prefix>.')
param storePrefix string

@description('True when queues live on Service Bus (coordinator trigger: servicebus).')
param useServiceBus bool

@description('Service Bus namespace name; ignored when useServiceBus is false.')
param serviceBusNamespaceName string

@description('Fully qualified Service Bus namespace (<name>.servicebus.windows.net); ignored without Service Bus.')
param serviceBusFullyQualifiedNamespace string

@description('Application Insights component (same resource group) receiving telemetry.')
param appInsightsName string

@description('Deliveries before a message is dead-lettered (DAGQ_MAX_DELIVERIES).')
param maxDeliveryCount int

@description('Lock / visibility timeout in seconds (DAGQ_VISIBILITY_TIMEOUT).')
param lockDurationSeconds int

@description('On-demand instances per Flex Consumption scale group (documented range 1-1000; main.bicep defaults to 40).')
@minValue(1)
@maxValue(1000)
param maximumInstanceCount int

@description('Memory of each instance in MB.')
@allowed([512, 2048, 4096])
param instanceMemoryMB int

@description('Concurrent HTTP requests one instance accepts.')
@minValue(1)
@maxValue(1000)
param httpPerInstanceConcurrency int

@description('Tags for every resource.')
param tags object

resource appInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: appInsightsName
}

resource plan 'Microsoft.Web/serverfarms@2024-04-01' = {
  //checkov:skip=CKV_AZURE_225:Zone redundancy depends on the region and adds cost; this deployment runs one on-demand coordinator instance. Set zoneRedundant on the plan where the region supports it.
  name: planName
  location: location
  tags: tags
  kind: 'functionapp'
  sku: {
    tier: 'FlexConsumption'
    name: 'FC1'
  }
  properties: {
    reserved: true
  }
}

var baseSettings = [
  // Host storage through the identity; the explicit service URIs let the scale
  // controller find queue depth without a connection string.
  {
    name: 'AzureWebJobsStorage__accountName'
    value: storageAccountName
  }
  {
    name: 'AzureWebJobsStorage__blobServiceUri'
    value: blobEndpoint
  }
  {
    name: 'AzureWebJobsStorage__queueServiceUri'
    value: queueEndpoint
  }
  {
    name: 'AzureWebJobsStorage__tableServiceUri'
    value: tableEndpoint
  }
  {
    name: 'AzureWebJobsStorage__credential'
    value: 'managedidentity'
  }
  {
    name: 'AzureWebJobsStorage__clientId'
    value: identityClientId
  }
  // DefaultAzureCredential in dagq code picks the user-assigned identity through this.
  {
    name: 'AZURE_CLIENT_ID'
    value: identityClientId
  }
  // Not a data key: it only routes telemetry, and local auth on the component is
  // disabled, so ingestion also needs the Entra ID token named below.
  {
    name: 'APPLICATIONINSIGHTS_CONNECTION_STRING'
    value: appInsights.properties.ConnectionString
  }
  {
    name: 'APPLICATIONINSIGHTS_AUTHENTICATION_STRING'
    value: 'ClientId=${identityClientId};Authorization=AAD'
  }
  {
    name: 'DAGQ_STORE'
    value: 'azure://${storageAccountName}/${storePrefix}'
  }
  {
    name: 'DAGQ_COORDINATOR_TRIGGER'
    value: useServiceBus ? 'servicebus' : 'storage_queue'
  }
  // The coordinator trigger binds to %DAGQ_COMPLETION_QUEUE%, on either transport.
  {
    name: 'DAGQ_COMPLETION_QUEUE'
    value: '${storePrefix}-completions'
  }
  {
    name: 'DAGQ_MAX_DELIVERIES'
    value: string(maxDeliveryCount)
  }
  {
    name: 'DAGQ_VISIBILITY_TIMEOUT'
    value: string(lockDurationSeconds)
  }
]

var serviceBusSettings = useServiceBus ? [
  {
    name: 'DAGQ_QUEUES'
    value: 'sb://${serviceBusNamespaceName}'
  }
  {
    name: 'ServiceBusConnection__fullyQualifiedNamespace'
    value: serviceBusFullyQualifiedNamespace
  }
  {
    name: 'ServiceBusConnection__credential'
    value: 'managedidentity'
  }
  {
    name: 'ServiceBusConnection__clientId'
    value: identityClientId
  }
] : []

resource site 'Microsoft.Web/sites@2024-04-01' = {
  //checkov:skip=CKV_AZURE_17:Client certificates would break CLI and worker callers that authenticate with function keys.
  //checkov:skip=CKV_AZURE_222:Workers and the CLI call the API over the public endpoint; restrict with access rules or a VNet deployment.
  //checkov:skip=CKV_AZURE_212:Flex Consumption has no fixed instance count to set failover capacity on.
  //checkov:skip=CKV_AZURE_213:GET /api/health needs a function key like every dagq route, and the platform health probe cannot send one; Flex restarts unhealthy instances itself.
  name: name
  location: location
  tags: tags
  kind: 'functionapp,linux'
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${identityId}': {}
    }
  }
  properties: {
    serverFarmId: plan.id
    httpsOnly: true
    clientCertEnabled: false
    publicNetworkAccess: 'Enabled'
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: '${blobEndpoint}${packageContainerName}'
          authentication: {
            type: 'UserAssignedIdentity'
            userAssignedIdentityResourceId: identityId
          }
        }
      }
      // The limit applies to the on-demand instances of each per-function scale group
      // (the HTTP group, the coordinator function, the repair timer), not to the app as a
      // whole: https://learn.microsoft.com/azure/azure-functions/event-driven-scaling#limit-scale-out
      // No always-ready instances: they would come on top of the limit.
      scaleAndConcurrency: {
        maximumInstanceCount: maximumInstanceCount
        instanceMemoryMB: instanceMemoryMB
        triggers: {
          http: {
            perInstanceConcurrency: httpPerInstanceConcurrency
          }
        }
      }
      runtime: {
        name: 'python'
        version: '3.11'
      }
    }
    siteConfig: {
      minTlsVersion: '1.2'
      scmMinTlsVersion: '1.2'
      ftpsState: 'Disabled'
      http20Enabled: true
      appSettings: concat(baseSettings, serviceBusSettings)
    }
  }
}

// Publishing profiles (basic auth to FTP and SCM) are secrets; deployments use Entra ID.
resource ftpPolicy 'Microsoft.Web/sites/basicPublishingCredentialsPolicies@2024-04-01' = {
  parent: site
  name: 'ftp'
  properties: {
    allow: false
  }
}

resource scmPolicy 'Microsoft.Web/sites/basicPublishingCredentialsPolicies@2024-04-01' = {
  parent: site
  name: 'scm'
  properties: {
    allow: false
  }
}

output FUNCTION_APP_NAME string = site.name
output FUNCTION_APP_HOSTNAME string = site.properties.defaultHostName
