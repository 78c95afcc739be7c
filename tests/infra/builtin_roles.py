"""Azure built-in role names and their definition ids, as Microsoft publishes them.

Source: https://learn.microsoft.com/azure/role-based-access-control/built-in-roles (and its
category pages .../built-in-roles/storage, .../integration, .../monitor, .../general); the
ids are the same in every Azure cloud. Only the roles the deployment grants, or must never
grant, are listed: a role id in infra/ that is not here is a typo or an unreviewed grant.
"""

from __future__ import annotations

BUILT_IN_ROLES = {
    "Storage Blob Data Owner": "b7e6dc6d-f1e8-4753-8033-0f276bb0955b",
    "Storage Blob Data Contributor": "ba92f5b4-2d11-453d-a403-e96b0029c9fe",
    "Storage Queue Data Contributor": "974c5e8b-45b9-4653-ba55-5f855dd0fb88",
    "Storage Table Data Contributor": "0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3",
    "Azure Service Bus Data Sender": "69a216fc-b8fb-44d8-bc22-1f3c2cd27a39",
    "Azure Service Bus Data Receiver": "4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0",
    # https://learn.microsoft.com/azure/role-based-access-control/built-in-roles/integration#azure-service-bus-data-owner
    "Azure Service Bus Data Owner": "090c5cfd-751d-490a-894a-3ce6f1109419",
    "Monitoring Metrics Publisher": "3913510d-42f4-4e42-8a64-420c390055eb",
    "Owner": "8e3af657-a8ff-443c-a75c-2fe8c4bcb635",
    "Contributor": "b24988ac-6180-42a0-ab88-20f7382dd24c",
    "User Access Administrator": "18d7d88d-d35e-4fb5-a5c3-7773c20a72d9",
    "Storage Account Contributor": "17d1049b-9a84-46fb-8f53-869881c3d3ab",
}

MANAGEMENT_ROLES = ("Owner", "Contributor", "User Access Administrator",
                    "Storage Account Contributor")
"""Roles the deployment must never grant (the last one can list account keys)."""

ROLE_OF_KEY = {
    "storageBlobDataOwner": "Storage Blob Data Owner",
    "storageBlobDataContributor": "Storage Blob Data Contributor",
    "storageQueueDataContributor": "Storage Queue Data Contributor",
    "storageTableDataContributor": "Storage Table Data Contributor",
    "serviceBusDataSender": "Azure Service Bus Data Sender",
    "serviceBusDataReceiver": "Azure Service Bus Data Receiver",
    "serviceBusDataOwner": "Azure Service Bus Data Owner",
    "monitoringMetricsPublisher": "Monitoring Metrics Publisher",
}
"""Each key of main.bicep's ``roles`` variable and the built-in role it must hold."""
