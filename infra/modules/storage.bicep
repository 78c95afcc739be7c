// Storage account holding dagq's state, outputs, index, records and (without Service Bus)
// its queues. It is also the Functions host storage and the Flex deployment container.
// Access is by Microsoft Entra ID only: shared keys (and therefore SAS) are disabled.

@description('Storage account name (3-24 lowercase letters and digits).')
@minLength(3)
@maxLength(24)
param name string

@description('Azure region.')
param location string

@description('Store prefix p: containers {p}-state/{p}-outputs, tables {p}index/{p}records, queues {p}-...')
@minLength(3)
@maxLength(24)
param storePrefix string

@description('True when task and completion queues live on Service Bus instead of Storage queues.')
param useServiceBus bool

@description('Hardware classes; one task queue {p}-q-{class} each (Storage queues only without Service Bus).')
param hardwareClasses array

@description('Replication of the account.')
@allowed(['Standard_LRS', 'Standard_ZRS', 'Standard_GRS', 'Standard_GZRS'])
param skuName string

@description('Days a deleted container stays recoverable (container soft delete; blob soft delete is off, see blobService).')
@minValue(1)
@maxValue(365)
param deleteRetentionDays int

@description('Container that receives the Functions deployment package.')
param packageContainerName string

@description('Tags for every resource.')
param tags object

// Table names allow letters and digits only.
var tablePrefix = replace(storePrefix, '-', '')
var taskQueueNames = [for c in hardwareClasses: '${storePrefix}-q-${c}']
var storageQueueNames = useServiceBus ? [] : concat(['${storePrefix}-completions', '${storePrefix}-deadletter'], taskQueueNames)

resource account 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  //checkov:skip=CKV_AZURE_35:Workers on AKS/Batch and the Flex app reach the account over its public endpoint; every request needs an Entra ID token (shared keys are off). Put the account behind private endpoints in a VNet deployment.
  //checkov:skip=CKV_AZURE_59:Same reason as CKV_AZURE_35: public endpoint, Entra ID-only access.
  //checkov:skip=CKV_AZURE_206:Replication is the skuName parameter; main.bicep defaults it to Standard_ZRS.
  name: name
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: skuName
  }
  properties: {
    accessTier: 'Hot'
    allowSharedKeyAccess: false
    defaultToOAuthAuthentication: true
    allowBlobPublicAccess: false
    allowCrossTenantReplication: false
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    publicNetworkAccess: 'Enabled'
    networkAcls: {
      bypass: 'AzureServices'
      defaultAction: 'Allow'
    }
    encryption: {
      keySource: 'Microsoft.Storage'
      requireInfrastructureEncryption: true
      services: {
        blob: {
          enabled: true
          keyType: 'Account'
        }
        file: {
          enabled: true
          keyType: 'Account'
        }
        queue: {
          enabled: true
          keyType: 'Account'
        }
        table: {
          enabled: true
          keyType: 'Account'
        }
      }
    }
  }
}

// Blob soft delete is off on purpose. With it on, every overwrite (Put Blob, Put Block List)
// keeps a soft-deleted snapshot for the whole retention period, and dagq overwrites the same
// blobs all the time: a workflow's state blob at every commit, and the log tail of an attempt
// with long output every 30 seconds (2,880 a day). Microsoft advises under 1,000 soft-deleted snapshots
// per blob within the retention period, as more slow down blob listing, and suggests keeping
// frequently overwritten data in an account with blob soft delete disabled:
//   https://learn.microsoft.com/azure/storage/blobs/soft-delete-vs-versioning-options
//   https://learn.microsoft.com/azure/storage/blobs/soft-delete-blob-overview#pricing-and-billing
// Versioning stays off for the same reason (a new version per write; same 1,000-per-blob advice).
// Container soft delete stays on: a deleted {p}-state or {p}-outputs container (with every blob
// in it) can be restored for deleteRetentionDays.
resource blobService 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' = {
  parent: account
  name: 'default'
  properties: {
    deleteRetentionPolicy: {
      enabled: false
    }
    isVersioningEnabled: false
    containerDeleteRetentionPolicy: {
      enabled: true
      days: deleteRetentionDays
    }
  }
}

resource containers 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = [for c in ['${storePrefix}-state', '${storePrefix}-outputs', packageContainerName]: {
  parent: blobService
  name: c
  properties: {
    publicAccess: 'None'
  }
}]

resource tableService 'Microsoft.Storage/storageAccounts/tableServices@2023-05-01' = {
  parent: account
  name: 'default'
}

resource tables 'Microsoft.Storage/storageAccounts/tableServices/tables@2023-05-01' = [for t in ['${tablePrefix}index', '${tablePrefix}records']: {
  parent: tableService
  name: t
}]

resource queueService 'Microsoft.Storage/storageAccounts/queueServices@2023-05-01' = {
  parent: account
  name: 'default'
}

resource queues 'Microsoft.Storage/storageAccounts/queueServices/queues@2023-05-01' = [for q in storageQueueNames: {
  parent: queueService
  name: q
}]

output STORAGE_ACCOUNT_NAME string = account.name
output STORAGE_ACCOUNT_ID string = account.id
output BLOB_ENDPOINT string = account.properties.primaryEndpoints.blob
output QUEUE_ENDPOINT string = account.properties.primaryEndpoints.queue
output TABLE_ENDPOINT string = account.properties.primaryEndpoints.table
output QUEUE_NAMES array = storageQueueNames
