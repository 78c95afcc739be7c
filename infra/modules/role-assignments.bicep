// Role assignments for one principal on one resource (a storage account, a Service Bus
// namespace, one queue of that namespace, or an Application Insights component of this
// resource group).
// Names are guid(scope, principal, role): stable across redeployments, unique per triple.
// The `existing` references only compute resource ids; each loop runs for one kind.

@description('Kind of the scope resource.')
@allowed(['storage', 'servicebus', 'servicebusqueue', 'appinsights'])
param scopeKind string

@description('Name of the scope resource in this resource group (the namespace for servicebusqueue).')
param scopeName string

@description('Queue of the namespace scopeName that is the scope (servicebusqueue only).')
param queueName string = ''

@description('Object (principal) id of the managed identity that receives the roles.')
param principalId string

@description('Built-in role definition ids (GUIDs) to assign.')
param roleDefinitionIds array

resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: scopeName
}

resource namespace 'Microsoft.ServiceBus/namespaces@2022-10-01-preview' existing = {
  name: scopeName
}

// Service Bus RBAC can be scoped to a single queue:
// https://learn.microsoft.com/azure/service-bus-messaging/service-bus-managed-service-identity#understand-service-bus-rbac-scope-levels
resource queue 'Microsoft.ServiceBus/namespaces/queues@2022-10-01-preview' existing = {
  parent: namespace
  name: empty(queueName) ? 'none' : queueName
}

resource appInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: scopeName
}

resource onStorage 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for roleId in roleDefinitionIds: if (scopeKind == 'storage') {
  name: guid(storage.id, principalId, roleId)
  scope: storage
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleId)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}]

resource onNamespace 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for roleId in roleDefinitionIds: if (scopeKind == 'servicebus') {
  name: guid(namespace.id, principalId, roleId)
  scope: namespace
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleId)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}]

resource onQueue 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for roleId in roleDefinitionIds: if (scopeKind == 'servicebusqueue') {
  name: guid(queue.id, principalId, roleId)
  scope: queue
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleId)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}]

resource onAppInsights 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for roleId in roleDefinitionIds: if (scopeKind == 'appinsights') {
  name: guid(appInsights.id, principalId, roleId)
  scope: appInsights
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleId)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}]
