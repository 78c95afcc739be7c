// Service Bus namespace for dagq's queues (deployed only when useServiceBus is true).
// Local (SAS) authentication is disabled: senders and receivers use Entra ID roles.

@description('Namespace name (6-50 letters, digits and hyphens).')
@minLength(6)
@maxLength(50)
param name string

@description('Azure region.')
param location string

@description('Store prefix p: completion queue {p}-completions, task queues {p}-q-{class}.')
param storePrefix string

@description('Hardware classes; one task queue {p}-q-{class} each.')
param hardwareClasses array

@description('Deliveries of a message before Service Bus moves it to the dead-letter subqueue.')
@minValue(1)
@maxValue(2000)
param maxDeliveryCount int

@description('Peek-lock duration of the task queues in seconds (Service Bus allows at most 300).')
@minValue(5)
@maxValue(300)
param lockDurationSeconds int

@description('How long a message id is remembered for duplicate detection (ISO 8601).')
param duplicateDetectionWindow string

@description('Namespace tier (Standard is the smallest tier with sessions and duplicate detection).')
@allowed(['Standard', 'Premium'])
param sku string

@description('Tags for every resource.')
param tags object

var lockDuration = 'PT${lockDurationSeconds}S'

// The coordinator trigger receives the completion queue in batches, and the Functions
// extension renews no lock of a batch: each invocation must end inside this lock, so it
// is the longest Service Bus allows (DAGQ_SB_LOCK_DURATION in the app must match it).
var completionLockDuration = 'PT5M'

// dagq sends at most 256 KiB per message on either tier (dagq.core.limits); on Premium the
// per-queue limit is set to its smallest value, 1 MiB, which covers that. Standard queues
// have a fixed 256 KiB limit and take no value.
var isPremium = sku == 'Premium'
var premiumMaxMessageSizeInKilobytes = 1024

resource namespace 'Microsoft.ServiceBus/namespaces@2022-10-01-preview' = {
  name: name
  location: location
  tags: tags
  sku: {
    name: sku
    tier: sku
  }
  properties: {
    disableLocalAuth: true
    minimumTlsVersion: '1.2'
    publicNetworkAccess: 'Enabled'
  }
}

// Completions carry session_id = workflow_id so one coordinator at a time owns a workflow.
resource completions 'Microsoft.ServiceBus/namespaces/queues@2022-10-01-preview' = {
  parent: namespace
  name: '${storePrefix}-completions'
  properties: {
    requiresSession: true
    requiresDuplicateDetection: true
    duplicateDetectionHistoryTimeWindow: duplicateDetectionWindow
    maxDeliveryCount: maxDeliveryCount
    lockDuration: completionLockDuration
    maxMessageSizeInKilobytes: isPremium ? premiumMaxMessageSizeInKilobytes : null
    deadLetteringOnMessageExpiration: true
    enableBatchedOperations: true
  }
}

// Task messages use message_id = "{workflow_id}/{task}/{attempt}", so a re-sent dispatch is dropped.
resource taskQueues 'Microsoft.ServiceBus/namespaces/queues@2022-10-01-preview' = [for c in hardwareClasses: {
  parent: namespace
  name: '${storePrefix}-q-${c}'
  properties: {
    requiresSession: false
    requiresDuplicateDetection: true
    duplicateDetectionHistoryTimeWindow: duplicateDetectionWindow
    maxDeliveryCount: maxDeliveryCount
    lockDuration: lockDuration
    maxMessageSizeInKilobytes: isPremium ? premiumMaxMessageSizeInKilobytes : null
    deadLetteringOnMessageExpiration: true
    enableBatchedOperations: true
  }
}]

output NAMESPACE_NAME string = namespace.name
output NAMESPACE_ID string = namespace.id
// serviceBusEndpoint is https://<name>.servicebus.<cloud suffix>:443/
output FULLY_QUALIFIED_NAMESPACE string = replace(replace(namespace.properties.serviceBusEndpoint, 'https://', ''), ':443/', '')
output COMPLETION_QUEUE string = completions.name
output TASK_QUEUES array = [for (c, i) in hardwareClasses: taskQueues[i].name]
